import json

import lightning as L
import torch

from erag import ERAGCallback
from rerag.data.datamodule import RERAGDataModule
from rerag.data.fid_format import read_fid
from rerag.infer.export import load_checkpoint
from rerag.integrations.erag_evaluation import generator_reader, rank_records, run_erag, validation_rankings
from rerag.module import RERAGModule


def test_rank_records_orders_by_the_re(trained_checkpoint, world_dir):
    estimator, _ = load_checkpoint(trained_checkpoint)
    records = list(read_fid(world_dir / "dev.jsonl"))[:2]
    results, expected = rank_records(records, estimator, top_k=4)
    for r in records:
        s = estimator.score(r["question"], r["ctxs"])
        best = r["ctxs"][int(torch.argmax(s))]
        assert results[r["id"]]["documents"][0].endswith(best["text"])
        assert len(results[r["id"]]["documents"]) == 4 and expected[r["id"]] == r["answers"]
    by_retriever, _ = rank_records(records, None, top_k=2)
    assert by_retriever[records[0]["id"]]["documents"][1].endswith(records[0]["ctxs"][1]["text"])


def test_run_erag_writes_report_and_scatter(trained_checkpoint, world_dir, tmp_path):
    result = run_erag(
        checkpoint=trained_checkpoint,
        data_file=str(world_dir / "dev.jsonl"),
        top_k=4,
        metrics=["P@2", "MRR"],
        max_questions=6,
        output_dir=str(tmp_path),
    )
    saved = json.loads((tmp_path / "erag_report.json").read_text())
    assert set(saved["labelings"]) == {"erag", "contains_answer"}
    assert len(saved["end_to_end"]["per_query"]) == 6
    assert (tmp_path / "erag_scatter.png").stat().st_size > 0
    assert set(result["labelings"]["erag"]["aggregated"]) == {"P@2", "MRR"}


def test_erag_callback_logs_during_fit(module_kwargs, data_kwargs, tmp_path):
    L.seed_everything(0)
    callback = ERAGCallback(
        ranking=lambda t, m: validation_rankings(t, m, top_k=3, max_questions=4),
        reader_fn=generator_reader,
        metrics=["P@3", "MRR"],
    )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        limit_train_batches=1,
        limit_val_batches=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[callback],
        default_root_dir=tmp_path,
    )
    trainer.fit(RERAGModule(**module_kwargs), datamodule=RERAGDataModule(**data_kwargs))
    assert {"erag/P@3", "erag/MRR"} <= set(trainer.callback_metrics)


def test_an_in_prompt_or_fid_reader_changes_end_to_end_reading_not_the_document_labels(
    trained_checkpoint, world_dir, tmp_path, monkeypatch
):
    """eRAG Figure 3's two readers: `ralm` puts the list in one prompt for the end-to-end score,
    `fid` encodes its documents apart and decodes them together (the paper's FiD); each document's
    label still comes from reading it alone."""
    from rerag.infer.readers import RAGReader

    modes = []
    original = RAGReader.answer
    monkeypatch.setattr(
        RAGReader,
        "answer",
        lambda self, q, c, w=None: modes.append((self.mode, max(map(len, c)))) or original(self, q, c, w),
    )
    args = dict(
        checkpoint=trained_checkpoint, data_file=str(world_dir / "dev.jsonl"), top_k=4, metrics=["P@2"], max_questions=4
    )
    rag = run_erag(**args, output_dir=str(tmp_path / "rag"))
    ralm = run_erag(**args, output_dir=str(tmp_path / "ralm"), reader="ralm")
    fid = run_erag(**args, output_dir=str(tmp_path / "fid"), reader="fid")
    assert (
        rag["labelings"]["erag"]["labels"] == ralm["labelings"]["erag"]["labels"] == fid["labelings"]["erag"]["labels"]
    )
    # the end-to-end reading of the 4-document lists
    assert ("ralm", 4) in modes and ("rag", 4) in modes and ("fid", 4) in modes


class ParisLM:
    """An LM (a 3-parameter model) that answers "paris" to every prompt and keeps the prompts."""

    template = "{question} {context}"

    def __init__(self):
        self.model, self.prompts = torch.nn.Linear(2, 1), []

    def generate(self, prompts, num_beams=1):
        self.prompts += prompts
        return ["paris"] * len(prompts), torch.zeros(len(prompts))


def test_an_llm_reads_instead_of_the_generator_and_its_size_is_reported(
    trained_checkpoint, world_dir, tmp_path, monkeypatch
):
    """eRAG Figure 2's readers of other sizes: `llm` judges every document and reads end to end."""
    from rerag.integrations import erag_evaluation

    lm = ParisLM()
    monkeypatch.setattr(erag_evaluation, "load_lm", lambda name: lm)
    result = run_erag(
        checkpoint=trained_checkpoint,
        data_file=str(world_dir / "dev.jsonl"),
        top_k=3,
        metrics=["P@3"],
        max_questions=4,
        output_dir=str(tmp_path),
        reader="ralm",
        llm="any",
    )
    assert result["reader"] == {"name": "any", "parameters": 3}
    assert len(lm.prompts) == 4 * 3 + 4  # each document alone (the labels), then each list in one prompt
    assert result["end_to_end"]["aggregated"] == 0.0  # no demo answer is "paris"
    assert not any(any(labels) for labels in result["labelings"]["erag"]["labels"].values())


def test_erag_on_a_bm25_run_with_any_lm_and_no_checkpoint(chat_tokenizer_dir, world_dir, tmp_path):
    from transformers import AutoTokenizer

    from rerag.cli import main
    from rerag.models.loading import ModelSpec, build_model
    from tests.rerag.conftest import TINY_LLAMA

    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    torch.manual_seed(0)
    build_model(ModelSpec(config=TINY_LLAMA), tok).save_pretrained(tmp_path / "llm")
    tok.save_pretrained(tmp_path / "llm")
    for ranking, extra in (("retriever", []), ("re", ["--estimator", "rerag:assets/relevance_estimator"])):
        out = tmp_path / ranking
        main(
            [
                "erag",
                "--data_file",
                str(world_dir / "dev.jsonl"),
                "--ranking",
                ranking,
                "--top_k",
                "3",
                "--max_questions",
                "4",
                "--llm",
                str(tmp_path / "llm"),
                "--output_dir",
                str(out),
                *extra,
            ]
        )
        report = json.loads((out / "erag_report.json").read_text())
        assert report["reader"]["name"] == str(tmp_path / "llm") and report["labelings"]
