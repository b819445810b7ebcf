import json

import lightning as L
import pytest
import torch
import yaml

from rerag.cli import main
from rerag.data.datamodule import RERAGDataModule
from rerag.inputs import passage_windows
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.module import RERAGModule
from tests.rerag.helpers import PASSAGES, QUESTION, changed, fit_and_checkpoint


def test_export_round_trip_gives_equal_scores(module_kwargs, data_kwargs, tmp_path):
    L.seed_everything(0)
    module, data = RERAGModule(**module_kwargs), RERAGDataModule(**data_kwargs)
    checkpoint = fit_and_checkpoint(module, data, tmp_path)
    main(["export", "--checkpoint", checkpoint, "--out", str(tmp_path / "export")])
    module.eval()

    folder = tmp_path / "export" / "estimator"
    estimator = RelevanceEstimator.from_pretrained(folder)  # no Lightning involved
    torch.testing.assert_close(estimator.score(QUESTION, PASSAGES), module.estimator.score(QUESTION, PASSAGES))
    settings = json.loads((folder / "rerag_estimator.json").read_text())
    assert settings["true_word"] == "true" and settings["template"] == module.inputs.re_template

    generator = Generator.from_pretrained(tmp_path / "export" / "generator")
    assert (generator.template, generator.max_length) == (data.inputs.generator_template, 64)
    enc = generator.tokenizer(["question: where? title: Ana context: Soltha"] * 2, return_tensors="pt", padding=True)
    labels = generator.encode_answers(["Soltha", "bees"])
    with torch.no_grad():
        torch.testing.assert_close(
            generator.answer_loglik(enc.input_ids, enc.attention_mask, labels),
            module.generator.answer_loglik(enc.input_ids, enc.attention_mask, labels),
        )

    # Only safetensors weights: nothing that unpickles, so nothing that can run code on load.
    written = {p.name for p in (tmp_path / "export").rglob("*")}
    assert "model.safetensors" in written and not any(n.endswith((".bin", ".pt", ".ckpt", ".pkl")) for n in written)


def test_a_run_evaluated_by_windows_exports_an_re_that_scores_by_windows(module_kwargs, data_kwargs, tmp_path):
    L.seed_everything(0)
    module = RERAGModule(**changed(module_kwargs, {"evaluation.window_pooling": "mean"}))
    data = RERAGDataModule(**data_kwargs, eval_context_words=4)
    checkpoint = fit_and_checkpoint(module, data, tmp_path)
    main(["export", "--checkpoint", checkpoint, "--out", str(tmp_path / "export")])
    estimator = RelevanceEstimator.from_pretrained(tmp_path / "export" / "estimator")
    assert (estimator.context_words, estimator.window_pooling) == (4, "mean")
    module.eval()
    passages = ["Ana kept bees near the river and Ana was born in Soltha long ago.", *PASSAGES]  # the first: windows
    by_window = module.estimator.score(QUESTION, passage_windows(passages[0], 4)).mean()
    assert estimator.score(QUESTION, passages)[0].item() == pytest.approx(by_window.item(), abs=1e-5)
    card = (tmp_path / "export" / "estimator" / "README.md").read_text()
    assert "| eval_context_words | `4` |" in card and '| evaluation.window_pooling | `"mean"` |' in card


def test_the_model_card_names_the_base_words_template_and_metrics(module_kwargs, data_kwargs, tmp_path):
    L.seed_everything(0)
    module, data = RERAGModule(**module_kwargs), RERAGDataModule(**data_kwargs)
    checkpoint = fit_and_checkpoint(module, data, tmp_path)
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"global_step": 2, "test/re_recall@1": 0.625, "test/em": 0.25}))
    main(["export", "--checkpoint", checkpoint, "--out", str(tmp_path / "export"), "--metrics", str(metrics)])
    card = (tmp_path / "export" / "estimator" / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "rerag" and "reranker" in front["tags"]
    assert "| test/re_recall@1 | 0.6250 |" in card and "| test/em | 0.2500 |" in card
    assert "`true` (relevant), `false`" in card and repr(module.inputs.re_template) in card
    # the run's settings, by group and field
    assert "| loss.alpha_re | `1.0` |" in card and "| optimizer.lr | `0.0001` |" in card
    assert "train_file" in card and "RelevanceEstimator.from_pretrained" in card and "AutoModelForSeq2SeqLM" in card
    assert "These weights are the run's after optimizer step 2." in card
    assert "measured on the weights of step 2." in card and "not on these" not in card

    # metrics of other weights than the exported ones are said to be
    metrics.write_text(json.dumps({"global_step": 1, "test/em": 0.25}))
    main(["export", "--checkpoint", checkpoint, "--out", str(tmp_path / "other"), "--metrics", str(metrics)])
    card = (tmp_path / "other" / "estimator" / "README.md").read_text()
    assert "The test metrics below were measured on the weights of step 1, not on these." in card


def test_predict_and_rank_agree_with_score(module_kwargs, data_kwargs):
    L.seed_everything(0)
    estimator = RERAGModule(**module_kwargs).estimator.eval()
    scores = estimator.score(QUESTION, PASSAGES, batch_size=2)
    torch.testing.assert_close(estimator.predict([(QUESTION, p) for p in PASSAGES], batch_size=2), scores)
    ranked = estimator.rank(QUESTION, PASSAGES, top_k=2)
    assert [r["corpus_id"] for r in ranked] == torch.argsort(scores, descending=True)[:2].tolist()
    assert [r["score"] for r in ranked] == pytest.approx(sorted(scores.tolist(), reverse=True)[:2])
    assert len(estimator.rank(QUESTION, PASSAGES)) == len(PASSAGES)


def test_the_shipped_estimator_reranks(world_dir, tmp_path):
    out = tmp_path / "reranked.jsonl"
    main(
        [
            "rerank",
            "--estimator",
            "rerag:assets/relevance_estimator",
            "--input",
            str(world_dir / "dev.jsonl"),
            "--output",
            str(out),
            "--top_k",
            "3",
            "--device",
            "cpu",
        ]
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(len(r["ctxs"]) == 3 for r in rows)
    assert all(r["ctxs"][0]["re_score"] >= r["ctxs"][1]["re_score"] for r in rows)
