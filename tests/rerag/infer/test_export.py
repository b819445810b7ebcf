import json

import lightning as L
import torch

from rerag.cli import main
from rerag.data.datamodule import RERAGDataModule
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.module import RERAGModule
from tests.rerag.helpers import PASSAGES, QUESTION, fit_and_checkpoint


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
    assert settings["true_word"] == "true" and settings["template"] == module.hparams.re_template

    generator = Generator.from_pretrained(tmp_path / "export" / "generator")
    assert (generator.template, generator.max_length) == (data.hparams.generator_template, 64)
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
