from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from transformers import AutoTokenizer

from rerag.cli import main
from rerag.data.datamodule import RERAGDataModule
from rerag.infer.export import export, load_checkpoint
from rerag.models.lora import LoraSpec
from rerag.models.estimator import RelevanceEstimator
from rerag.models.loading import ModelSpec, build_seq2seq
from rerag.module import RERAGModule
from tests.rerag.helpers import PASSAGES, QUESTION, fit_and_checkpoint

ROOT = Path(__file__).resolve().parents[3]
LORA = LoraSpec(r=4, alpha=8, dropout=0.0, target_modules=["q", "v"])


def test_only_adapters_train_and_merged_export_scores_equal(module_kwargs, data_kwargs, tmp_path):
    L.seed_everything(0)
    module = RERAGModule(**{**module_kwargs, "lr": 1e-2}, estimator_lora=LORA, generator_lora=LORA)
    trainable = [n for n, p in module.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    checkpoint = fit_and_checkpoint(module, RERAGDataModule(**data_kwargs), tmp_path, steps=3)
    changed = {n for n, p in module.named_parameters() if not torch.equal(p, before[n])}
    assert changed and changed <= set(trainable)

    estimator, generator = load_checkpoint(checkpoint)  # LoraSpec in the hparams loads with weights_only
    unmerged = estimator.score(QUESTION, PASSAGES)
    export(estimator, generator, tmp_path / "export")
    assert not (tmp_path / "export" / "estimator" / "adapter_config.json").exists()
    merged = RelevanceEstimator.from_pretrained(tmp_path / "export" / "estimator")
    torch.testing.assert_close(merged.score(QUESTION, PASSAGES), unmerged, atol=1e-5, rtol=1e-5)


def test_adapters_only_export_loads_over_its_base(tokenizer_dir, tiny_t5, tmp_path):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    base = build_seq2seq(ModelSpec(config=tiny_t5), tok)
    base.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    module = RERAGModule(estimator=ModelSpec(name_or_path=str(tmp_path / "base")),
                         generator=ModelSpec(config=tiny_t5), re_tokenizer=tokenizer_dir,
                         generator_tokenizer=tokenizer_dir, estimator_lora=LORA).eval()
    with torch.no_grad():  # B starts at zero; make the adapters matter
        for name, p in module.estimator.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    expected = module.estimator.score(QUESTION, PASSAGES)
    export(module.estimator, module.generator, tmp_path / "export", adapters_only=True)
    folder = tmp_path / "export" / "estimator"
    assert (folder / "adapter_model.safetensors").is_file() and not (folder / "model.safetensors").exists()
    assert (tmp_path / "export" / "generator" / "model.safetensors").is_file()  # no adapters: written whole
    torch.testing.assert_close(RelevanceEstimator.from_pretrained(folder).score(QUESTION, PASSAGES), expected,
                               atol=1e-5, rtol=1e-5)


def test_adapters_only_needs_a_named_base(module_kwargs, tmp_path):
    module = RERAGModule(**module_kwargs, generator_lora=LORA)
    with pytest.raises(ValueError, match="generator was built from a config"):
        export(module.estimator, module.generator, tmp_path, adapters_only=True)


def test_lora_is_a_config_option(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(ROOT / "configs" / "demo.yaml"), "--model.estimator_lora.r=4", "--print_config"])
    printed = yaml.safe_load(capsys.readouterr().out)["model"]
    assert printed["estimator_lora"]["r"] == 4 and printed["generator_lora"] is None
