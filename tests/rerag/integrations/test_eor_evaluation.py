import json

from eor import EoRConfig
from rerag.integrations.eor_evaluation import run_eor


def test_eor_on_a_trained_checkpoint(trained_checkpoint, world_dir, tmp_path):
    pool = ["BM25@3", "BM25@RR@3", "BM25@2&BM25@RR@2", "ReFree"]
    report = run_eor(checkpoint=trained_checkpoint, questions_file=str(world_dir / "dev.jsonl"), corpus_file=str(world_dir / "corpus.jsonl"), pool=pool,
                     candidates=12, output_dir=str(tmp_path), eor=EoRConfig(train_fraction=0.5))
    assert list(report.retriever_em) == pool
    assert set(report.mrlr_with_eor) == {*pool, "EoR"}
    assert 0.0 <= report.eor_em <= 100.0
    saved = json.loads((tmp_path / "eor_report.json").read_text())
    assert saved["retriever_em"] == report.retriever_em
    assert (tmp_path / "eor_weights.json").is_file() and (tmp_path / "rwr_heatmap.png").is_file()
