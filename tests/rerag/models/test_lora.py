from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from transformers import AutoTokenizer

from erag.lm import BASE_ADAPTER, adapter_scope
from rerag.assembly import AssemblySpec
from rerag.cli import main
from rerag.data.datamodule import RERAGDataModule
from rerag.infer.export import export, load_checkpoint
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model
from rerag.models.lora import LoraSpec, add_lora
from rerag.module import RERAGModule
from rerag.optimization import OptimizerSpec
from rerag.stages import RE_ALONE
from tests.rerag.conftest import TINY_LLAMA
from tests.rerag.helpers import PASSAGES, QUESTION, fit_and_checkpoint

ROOT = Path(__file__).resolve().parents[3]
LORA = LoraSpec(r=4, alpha=8, dropout=0.0, target_modules=["q", "v"])


def test_only_adapters_train_and_merged_export_scores_equal(module_kwargs, data_kwargs, tmp_path):
    L.seed_everything(0)
    module = RERAGModule(
        **module_kwargs,
        optimizer=OptimizerSpec(lr=1e-2),
        assembly=AssemblySpec(estimator_lora=LORA, generator_lora=LORA),
    )
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


def test_adapters_only_export_loads_over_its_base(inputs, tokenizer_dir, tiny_t5, tmp_path):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    base = build_model(ModelSpec(config=tiny_t5), tok)
    base.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    module = RERAGModule(
        estimator=ModelSpec(name_or_path=str(tmp_path / "base")),
        generator=ModelSpec(config=tiny_t5),
        inputs=inputs,
        assembly=AssemblySpec(estimator_lora=LORA),
    ).eval()
    with torch.no_grad():  # B starts at zero; make the adapters matter
        for name, p in module.estimator.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    expected = module.estimator.score(QUESTION, PASSAGES)
    export(module.estimator, module.generator, tmp_path / "export", adapters_only=True)
    folder = tmp_path / "export" / "estimator"
    assert (folder / "adapter_model.safetensors").is_file() and not (folder / "model.safetensors").exists()
    assert (tmp_path / "export" / "generator" / "model.safetensors").is_file()  # no adapters: written whole
    torch.testing.assert_close(
        RelevanceEstimator.from_pretrained(folder).score(QUESTION, PASSAGES), expected, atol=1e-5, rtol=1e-5
    )


def test_adapters_only_needs_a_named_base(module_kwargs, tmp_path):
    module = RERAGModule(**module_kwargs, assembly=AssemblySpec(generator_lora=LORA))
    with pytest.raises(ValueError, match="generator was built from a config"):
        export(module.estimator, module.generator, tmp_path, adapters_only=True)


def test_lora_is_a_config_option(capsys):
    with pytest.raises(SystemExit):
        main(
            [
                "fit",
                "--config",
                str(ROOT / "configs" / "demo.yaml"),
                "--model.assembly.estimator_lora.r=4",
                "--print_config",
            ]
        )
    printed = yaml.safe_load(capsys.readouterr().out)["model"]["assembly"]
    assert printed["estimator_lora"]["r"] == 4 and printed["generator_lora"] is None


# ---- RE and generator as two adapters of one shared base (decoder-only) ----------------------
LLAMA_LORA = LoraSpec(r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj"])


@pytest.fixture
def llama_base(chat_tokenizer_dir, tmp_path):
    """A tiny Llama saved as a folder: a base that adapters-only exports can name."""
    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    torch.manual_seed(0)
    build_model(ModelSpec(config=TINY_LLAMA), tok).save_pretrained(tmp_path / "llama")
    tok.save_pretrained(tmp_path / "llama")
    return ModelSpec(name_or_path=str(tmp_path / "llama"))


def shared(causal_module_kwargs, base, estimator_lora=LLAMA_LORA, generator_lora=LLAMA_LORA, **kw):
    """The RE and the generator as adapters of one shared base (`kw` other module arguments)."""
    return RERAGModule(
        **{
            **causal_module_kwargs,
            "estimator": base,
            "generator": None,
            "optimizer": OptimizerSpec(lr=1e-2),
            "assembly": AssemblySpec(estimator_lora=estimator_lora, generator_lora=generator_lora, shared_base=True),
            **kw,
        }
    )


def test_shared_base_holds_one_copy_and_trains_both_adapters(
    causal_module_kwargs, causal_data_kwargs, llama_base, tmp_path
):
    L.seed_everything(0)
    module = shared(causal_module_kwargs, llama_base)
    assert module.estimator.model is module.generator.model
    base_size = sum(p.numel() for p in build_model(llama_base, module.estimator.tokenizer).parameters())
    lora_size = sum(p.numel() for n, p in module.named_parameters() if "lora_" in n)
    assert sum(p.numel() for p in module.parameters()) == base_size + lora_size  # the base once
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    fit_and_checkpoint(module, RERAGDataModule(**causal_data_kwargs), tmp_path, steps=3)
    changed = {n for n, p in module.named_parameters() if not torch.equal(p, before[n])}
    assert any(".re." in n for n in changed) and any(".generator." in n for n in changed)
    assert all("lora_" in n for n in changed)  # the base stays frozen


@pytest.mark.parametrize("adapters_only", [False, True])
def test_shared_base_exports_each_adapter_with_equal_scores(causal_module_kwargs, llama_base, adapters_only, tmp_path):
    module = shared(causal_module_kwargs, llama_base).eval()
    with torch.no_grad():  # B starts at zero; make each adapter matter, differently
        for name, p in module.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    scores = module.estimator.score(QUESTION, PASSAGES)
    lm = module.generator.as_lm()
    prompts, answers = [f"where? {p}" for p in ("Soltha", "bees")], ["Soltha", "bees"]
    loglik = lm.loglik(prompts, answers)
    with adapter_scope(module.estimator.model, BASE_ADAPTER):
        base_scores = module.estimator.score(QUESTION, PASSAGES)
    assert not torch.allclose(scores, base_scores)

    export(module.estimator, module.generator, tmp_path / "export", adapters_only=adapters_only)
    re_folder, gen_folder = tmp_path / "export" / "estimator", tmp_path / "export" / "generator"
    assert (re_folder / "adapter_config.json").is_file() == adapters_only
    torch.testing.assert_close(
        RelevanceEstimator.from_pretrained(re_folder).score(QUESTION, PASSAGES), scores, atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        Generator.from_pretrained(gen_folder).as_lm().loglik(prompts, answers), loglik, atol=1e-4, rtol=1e-4
    )


def test_shared_base_with_a_frozen_generator_trains_the_re_adapter_alone(
    causal_module_kwargs, causal_data_kwargs, llama_base, tmp_path
):
    L.seed_everything(0)
    module = shared(causal_module_kwargs, llama_base, stages=RE_ALONE, generator_lora=None)
    assert module.generator.adapter == BASE_ADAPTER
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    fit_and_checkpoint(module, RERAGDataModule(**causal_data_kwargs), tmp_path, steps=3)
    changed = {n for n, p in module.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(".re." in n for n in changed)


def test_shared_base_settings_are_checked(causal_module_kwargs, llama_base):
    with pytest.raises(ValueError, match=r"model\.assembly\.shared_base needs model\.assembly\.estimator_lora"):
        shared(causal_module_kwargs, llama_base, estimator_lora=None)
    with pytest.raises(ValueError, match="set model.generator to null"):
        shared(causal_module_kwargs, llama_base, generator=ModelSpec(config=TINY_LLAMA))


def test_layers_to_transform_adapts_only_those_layers():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**{k: v for k, v in TINY_LLAMA.items() if k != "model_type"} | {"num_hidden_layers": 3})
    model = add_lora(LlamaForCausalLM(config), LoraSpec(r=2, target_modules=["q_proj"], layers_to_transform=[2]))
    adapted = {n.split(".layers.")[1].split(".")[0] for n, _ in model.named_parameters() if "lora_" in n}
    assert adapted == {"2"}
