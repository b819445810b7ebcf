import json

import torch

from eor import EoRConfig
from rerag.integrations import eor_evaluation
from rerag.integrations.eor_evaluation import run_eor


def test_eor_on_a_trained_checkpoint(trained_checkpoint, world_dir, tmp_path):
    pool = ["BM25@3", "BM25@RR@3", "BM25@2&BM25@RR@2", "ReFree"]
    report = run_eor(
        checkpoint=trained_checkpoint,
        questions_file=str(world_dir / "dev.jsonl"),
        corpus_file=str(world_dir / "corpus.jsonl"),
        pool=pool,
        candidates=12,
        output_dir=str(tmp_path),
        eor=EoRConfig(train_fraction=0.5),
    )
    assert list(report.retriever_em) == pool
    assert set(report.mrlr_with_eor) == {*pool, "EoR"}
    assert 0.0 <= report.eor_em <= 100.0
    saved = json.loads((tmp_path / "eor_report.json").read_text())
    assert saved["retriever_em"] == report.retriever_em
    assert (tmp_path / "eor_weights.json").is_file() and (tmp_path / "rwr_heatmap.png").is_file()


class RecordingLM:
    """An LM that answers "paris" to everything and keeps every prompt it was given."""

    template = "{question}"

    def __init__(self):
        self.prompts = []

    def to(self, device):
        return self

    def generate(self, prompts, num_beams=1):
        self.prompts += prompts
        return ["paris"] * len(prompts), torch.zeros(len(prompts))


def test_an_llm_reads_the_pool_with_the_papers_prompts_and_writes_pk_and_cp(
    trained_checkpoint, world_dir, tmp_path, monkeypatch
):
    lm = RecordingLM()
    monkeypatch.setattr(eor_evaluation, "load_lm", lambda name: lm)
    pool = ["BM25@2", "BM25@2@CP", "PK", "ReFree"]
    report = run_eor(
        checkpoint=trained_checkpoint,
        questions_file=str(world_dir / "dev.jsonl"),
        corpus_file=str(world_dir / "corpus.jsonl"),
        pool=pool,
        candidates=12,
        max_questions=4,
        output_dir=str(tmp_path),
        eor=EoRConfig(train_fraction=0.5),
        llm="any",
    )
    assert list(report.retriever_em) == pool
    kinds = {p.split("\n")[0].split(" ")[0] for p in lm.prompts}
    assert kinds == {"Assuming", "Please", "Generate"}  # RALM, retrieval-free / @CP, PK (appendix C.2)
    ralm = [p for p in lm.prompts if p.startswith("Assuming the following paragraphs are true:")]
    assert len(ralm) == 3 * 4  # BM25@2, BM25@2@CP and PK read in one prompt each, 4 questions
    assert any("summarize the document below" in p for p in lm.prompts)
    assert sum(p.startswith("Please directly answer") for p in lm.prompts) == 4  # ReFree
