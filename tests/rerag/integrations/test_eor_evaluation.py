import json

import pytest
import torch
from transformers import AutoTokenizer

from eor import EoRConfig
from rerag.cli import main
from rerag.integrations import eor_evaluation
from rerag.integrations.eor_evaluation import run_eor
from rerag.models.loading import ModelSpec, build_model
from tests.rerag.conftest import TINY_LLAMA


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


@pytest.fixture
def tiny_llm_dir(chat_tokenizer_dir, tmp_path):
    """A tiny random Llama with a chat template, saved as a Hugging Face folder: any LM as the reader."""
    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    torch.manual_seed(0)
    folder = tmp_path / "tiny_llm"
    build_model(ModelSpec(config=TINY_LLAMA), tok).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def test_eor_on_a_bm25_run_with_any_lm_and_no_checkpoint(tiny_llm_dir, world_dir, tmp_path):
    out = tmp_path / "eor"
    main(
        [
            "eor",
            "--questions_file",
            str(world_dir / "dev.jsonl"),
            "--corpus_file",
            str(world_dir / "corpus.jsonl"),
            "--pool",
            '["BM25@2", "BM25@RR@2", "ReFree"]',
            "--candidates",
            "8",
            "--max_questions",
            "6",
            "--llm",
            tiny_llm_dir,
            "--estimator",
            "rerag:assets/relevance_estimator",
            "--output_dir",
            str(out),
        ]
    )
    saved = json.loads((out / "eor_report.json").read_text())
    assert list(saved["retriever_em"]) == ["BM25@2", "BM25@RR@2", "ReFree"]


def test_eor_without_a_reranker_refuses_an_rr_pool(tiny_llm_dir, world_dir, tmp_path):
    with pytest.raises(ValueError, match="BM25@RR@2"):
        run_eor(
            questions_file=str(world_dir / "dev.jsonl"),
            corpus_file=str(world_dir / "corpus.jsonl"),
            pool=["BM25@RR@2"],
            llm=tiny_llm_dir,
            output_dir=str(tmp_path),
        )
    with pytest.raises(ValueError, match="no reader"):
        run_eor(
            questions_file=str(world_dir / "dev.jsonl"),
            corpus_file=str(world_dir / "corpus.jsonl"),
            pool=["BM25@2"],
            output_dir=str(tmp_path),
        )
