"""rerag.fit_config: a bf16 precision on a CPU without bf16 instructions turns float32 before the models load;
the datamodule takes the models' settings it shares (model.inputs); a checkpoint keeps its trained settings
(each one replaced named) and takes the evaluation settings asked (model.evaluation); a setting rerag 0.2
removed or moved into a group is refused naming what replaces it."""

import dataclasses
import inspect
import json
import re
import typing
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from jsonargparse import Namespace

import rerag
import rerag.data.datamodule as datamodule_module
from erag.lm import load_tokenizer as real_load_tokenizer
from rerag.fit_config import (
    MOVED_SETTINGS,
    REMOVED_SETTINGS,
    RERAGCLI,
    build_fit,
    cpu_computes_bf16,
    float32_where_bf16_is_emulated,
    replaced_settings,
    run_cli,
)
from rerag.module import RERAGModule
from tests.rerag.conftest import TINY_LLAMA, chat_tokenizer_dir, world_dir  # noqa: F401 (fixtures)
from tests.rerag.helpers import write_config


@pytest.fixture
def cpuinfo(tmp_path):
    def write(flags: str):
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f {flags}\n")
        return path

    return write


def test_bf16_instructions_are_read_from_the_cpu_flags(cpuinfo, tmp_path):
    assert cpu_computes_bf16(cpuinfo("avx512_bf16")) is True
    assert cpu_computes_bf16(cpuinfo("amx_bf16 amx_tile")) is True
    assert cpu_computes_bf16(cpuinfo("")) is False
    assert cpu_computes_bf16(tmp_path / "absent") is None  # not Linux: unknown, no warning


def run_config(precision: str, allow: bool = False, teacher_dtype: str = "float32") -> Namespace:
    teacher = Namespace(cache_dir="cache", model=Namespace(dtype=teacher_dtype))
    model = Namespace(estimator=Namespace(dtype="bfloat16"), generator=None, teacher=teacher)
    return Namespace(trainer=Namespace(accelerator="cpu", precision=precision), model=model, allow_emulated_bf16=allow)


def test_bf16_on_a_cpu_without_it_runs_in_float32_and_says_so(cpuinfo):
    config = run_config("bf16-mixed")
    with pytest.warns(
        UserWarning,
        match=r"bf16-mixed -> 32-true; model\.estimator\.dtype bfloat16 -> null\); --allow_emulated_bf16 true",
    ):
        float32_where_bf16_is_emulated(config, cpuinfo(""))
    assert config.trainer.precision == "32-true"
    assert config.model.estimator.dtype is None  # a float32 precision over bf16 weights would still emulate
    assert config.model.teacher.model.dtype == "float32"


def test_bf16_turns_float32_in_the_teachers_model_too_and_names_it(cpuinfo):
    config = run_config("bf16-mixed", teacher_dtype="bfloat16")
    with pytest.warns(UserWarning, match=r"model\.teacher\.model\.dtype bfloat16 -> null"):
        float32_where_bf16_is_emulated(config, cpuinfo(""))
    assert config.model.teacher.model.dtype is None
    config = run_config("bf16-mixed")
    config.model.teacher = None  # no teacher cache: nothing of it to change
    with pytest.warns(UserWarning, match=r"model\.estimator\.dtype bfloat16 -> null\)"):
        float32_where_bf16_is_emulated(config, cpuinfo(""))


@pytest.mark.parametrize(
    "precision, flags, allow",
    [
        ("32-true", "", False),
        ("bf16-mixed", "avx512_bf16", False),
        ("bf16-true", "amx_bf16", False),
        ("bf16-mixed", "", True),
    ],
)
def test_float32_a_cpu_with_bf16_or_the_switch_off_keeps_the_precision(cpuinfo, precision, flags, allow):
    config = run_config(precision, allow)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        float32_where_bf16_is_emulated(config, cpuinfo(flags))
    assert (config.trainer.precision, config.model.estimator.dtype) == (precision, "bfloat16")


@pytest.mark.parametrize(
    "overrides, want",
    [
        ([], (False, False)),
        (["--model.estimator.trust_remote_code", "true"], (True, True)),  # shared base: one spec for both
        (
            ["--model.assembly.shared_base", "false", "--model.generator", json.dumps({"config": TINY_LLAMA})],
            (False, False),
        ),
        (
            [
                "--model.assembly.shared_base",
                "false",
                "--model.generator",
                json.dumps({"config": TINY_LLAMA, "trust_remote_code": True}),
            ],
            (False, True),
        ),
    ],
)
def test_the_datamodule_loads_each_tokenizer_with_its_models_trust_in_remote_code(
    overrides, want, tmp_path, world_dir, chat_tokenizer_dir, monkeypatch
):
    loaded = []

    def load_tokenizer(name, trust_remote_code=False):
        loaded.append(trust_remote_code)
        return real_load_tokenizer(name, trust_remote_code)

    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    datamodule = build_fit(["--config", str(config), *overrides]).datamodule
    monkeypatch.setattr(datamodule_module, "load_tokenizer", load_tokenizer)
    datamodule.setup("validate")
    assert tuple(loaded) == want  # the RE's, then the generator's


def test_the_datamodule_reads_the_models_inputs_declared_once(tmp_path, world_dir, chat_tokenizer_dir):
    """model.inputs is linked to data.init_args.inputs: the datamodule tokenizes with the models' own
    tokenizers, templates and lengths, a command line's change included."""
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    template = "Q: {question} P: {text}"
    fit = build_fit(["--config", str(config), "--model.inputs.re_template", template])
    assert fit.datamodule.inputs == fit.model.inputs
    assert fit.model.inputs.re_template == template and fit.model.inputs.re_tokenizer == chat_tokenizer_dir
    assert fit.model.estimator.template == template  # the RE reads what the datamodule writes
    fit.datamodule.setup("validate")
    assert fit.datamodule.re_tok.name_or_path == chat_tokenizer_dir
    with pytest.raises(ValueError, match=re.escape("data.init_args.re_template -> model.inputs.re_template")):
        build_fit(["--config", str(config), "--data.init_args.re_template", template])


def test_a_checkpoint_keeps_its_trained_settings_by_name_and_takes_the_evaluation_ones_asked(
    tmp_path, world_dir, chat_tokenizer_dir, monkeypatch
):
    """LightningCLI applies a --ckpt_path checkpoint's hyperparameters over the config and command line:
    rerag takes back those that only shape evaluation and names the others replaced."""
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    checkpoint = tmp_path / "best.ckpt"
    hparams = {"evaluation": {"test_top_k": 1, "recall_ks": [1]}, "optimizer": {"lr": 0.01}}
    torch.save({"hyper_parameters": hparams, "rerag_version": rerag.__version__}, checkpoint)

    class Parsed(Exception):
        pass

    def stop(self):  # the parse is what is tested: no model is built
        model = self.config.test.model
        raise Parsed(model.evaluation.test_top_k, model.evaluation.recall_ks, model.optimizer.lr)

    monkeypatch.setattr(RERAGCLI, "before_instantiate_classes", stop)
    args = ["test", "--config", str(config), "--model.evaluation.test_top_k", "3", "--model.optimizer.lr", "0.5"]
    args += ["--model.evaluation.recall_ks", "[1,2]", "--ckpt_path", str(checkpoint)]
    with pytest.warns(
        UserWarning,
        match=r"replace these settings of the config and command line: model\.optimizer\.lr: 0\.5 -> 0\.01$",
    ):
        with pytest.raises(Parsed) as parsed:
            run_cli(args)
    assert parsed.value.args == (3, [1, 2], 0.01)  # evaluation as asked, the trained setting the checkpoint's
    asked = {"optimizer": {"lr": 0.01}, "evaluation": {"test_top_k": 3}}
    restored = {"optimizer": {"lr": 0.01}, "evaluation": {"test_top_k": 1}}
    assert replaced_settings(asked, restored) == {"evaluation.test_top_k": (3, 1)}


def test_replaced_settings_are_keyed_by_group_and_field():
    asked = {"loss": {"alpha_re": 1.0, "alpha_tok": 1.0}, "teacher": None, "stages": None}
    restored = {"loss": {"alpha_re": 0.5, "alpha_tok": 1.0}, "teacher": {"cache_dir": "c"}, "stages": None}
    # a group's own value where it is not a mapping (teacher null); a field absent from the restored side is kept
    assert replaced_settings(asked, restored) == {"loss.alpha_re": (1.0, 0.5), "teacher": (None, {"cache_dir": "c"})}
    assert replaced_settings({"loss": {"re_clamp": 1e-5}}, {"loss": {}}) == {}
    lora = {"r": 4, "alpha": 8}
    asked = {"assembly": {"estimator_lora": None, "generator_lora": lora}}
    restored = {"assembly": {"estimator_lora": lora, "generator_lora": lora | {"r": 2}}}
    assert replaced_settings(asked, restored) == {
        "assembly.estimator_lora": (None, lora),  # set on one side only: named whole
        "assembly.generator_lora.r": (4, 2),
    }


@pytest.mark.parametrize("weights, step", [("best", 3), ("final", 7)])
def test_a_fit_tests_the_weights_it_names_and_says_their_step(
    tmp_path, world_dir, chat_tokenizer_dir, caplog, weights, step
):
    """48 questions in batches of 2 and accumulations of 5: 5 steps an epoch, the last of 4 batches.
    Validated every 3 steps and after the last (3, 6, 7); Lightning's ModelCheckpoint keeps the first
    of the tied BM25 scores (step 3) as best; `test_weights` picks it or the final weights."""
    import logging

    import yaml

    config_path = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    config = yaml.safe_load(config_path.read_text())
    config["trainer"] |= {
        "enable_checkpointing": True,
        "max_steps": 7,
        "accumulate_grad_batches": 5,
        "limit_val_batches": 1,
        "limit_test_batches": 1,
        "num_sanity_val_steps": 0,
        "callbacks": [
            {
                "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                "init_args": {"dirpath": str(tmp_path / "ckpt"), "monitor": "val/retriever_recall@1", "mode": "max"},
            },
            {"class_path": "rerag.callbacks.MetricsWriter", "init_args": {"path": str(tmp_path / "metrics.json")}},
        ],
    }
    config["data"]["init_args"]["test_file"] = str(world_dir / "test.jsonl")
    config_path.write_text(yaml.safe_dump(config))
    args = ["fit", "--config", str(config_path), "--validation.every_n_steps", "3", "--test_after_fit", "true"]
    with caplog.at_level(logging.INFO):
        cli = run_cli(args + ["--test_weights", weights, "--trainer.default_root_dir", str(tmp_path)])
    assert cli.trainer.global_step == 7
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["global_step"] == step
    assert (written["checkpoint"] is None) == (weights == "final")
    assert f"test_after_fit: tested the weights of optimizer step {step} (" in caplog.text


@pytest.mark.parametrize(
    "key, replacement",
    [
        ("model.teacher_steps", "model.stages: [{steps: N, train: estimator"),
        ("model.freeze_generator", "model.stages: [{train: estimator, re_learns_from: teacher}]"),
        ("data.init_args.skip_short_train_contexts", "nothing"),
        # the flat model settings rerag 0.2 moved into typed groups
        ("model.alpha_anchor", "model.loss.alpha_anchor"),
        ("model.normalize_re", "model.loss.normalized"),
        ("model.gradient_clip_per_model", "model.optimizer.clip_per_model"),
        ("model.teacher_cache_dir", "model.teacher.cache_dir"),
        ("model.teacher_question_template", "model.teacher.question_template"),
        ("model.shared_base", "model.assembly.shared_base"),
        ("model.test_top_k", "model.evaluation.test_top_k"),
        ("model.re_template", "model.inputs.re_template"),
        ("data.init_args.re_tokenizer", "model.inputs.re_tokenizer"),
    ],
)
def test_a_removed_setting_is_named_with_what_replaces_it(tmp_path, key, replacement):
    old = tmp_path / "old.yaml"
    nested = 1
    for part in reversed(key.split(".")):
        nested = {part: nested}
    old.write_text(yaml.safe_dump(nested))
    with pytest.raises(ValueError, match=re.escape(f"old.yaml: {key} -> {replacement}")):
        build_fit(["--config", "configs/quickstart.yaml", "--config", str(old)])
    assert key in REMOVED_SETTINGS
    with pytest.raises(ValueError, match=re.escape(f"--{key} -> {replacement}")):
        build_fit(["--config", "configs/quickstart.yaml", f"--{key}", "1"])


#: RERAGModule's flat arguments before rerag 0.2 gathered them into typed groups.
FLAT_SETTINGS = (
    "re_tokenizer generator_tokenizer re_template re_max_length generator_template generator_max_length "
    "max_answer_length true_word false_word alpha_re alpha_tok alpha_anchor kl_direction teacher_temperature lr "
    "estimator_lr lr_schedule warmup_steps weight_decay val_top_k test_top_k num_beams score_batch_size recall_ks "
    "eval_depths kernel_backend estimator_lora generator_lora shared_base gradient_checkpointing compile "
    "normalize_re gen_reduction re_clamp gradient_clip_per_model teacher_cache_dir teacher_tokenizer "
    "teacher_template teacher_question_template window_pooling"
).split()


def test_every_flat_model_setting_moved_to_a_field_of_its_group():
    assert sorted(MOVED_SETTINGS) == sorted(FLAT_SETTINGS)
    groups = dict(inspect.signature(RERAGModule.__init__).parameters)
    for old, new in MOVED_SETTINGS.items():
        group, field = new.split(".")
        spec = typing.get_type_hints(RERAGModule.__init__)[group]
        spec = next(t for t in typing.get_args(spec) if t is not type(None)) if typing.get_args(spec) else spec
        assert field in {f.name for f in dataclasses.fields(spec)}, f"{old} -> {new}: no such field"
        assert group in groups
        assert REMOVED_SETTINGS[f"model.{old}"] == f"model.{new}"


def test_a_checkpoint_of_another_minor_version_is_refused_naming_it(tmp_path):
    from rerag.infer.export import load_checkpoint

    old = tmp_path / "old.ckpt"
    torch.save({"hyper_parameters": {"freeze_generator": True}, "state_dict": {}}, old)  # 0.1 wrote no version
    with pytest.raises(ValueError, match=r"old\.ckpt: a rerag 0\.1 checkpoint; rerag 0\.2\.0 reads"):
        load_checkpoint(old)
    with pytest.raises(ValueError, match=r"a rerag 0\.1 checkpoint"):
        run_cli(["test", "--config", "configs/quickstart.yaml", "--ckpt_path", str(old)])


def test_the_package_version_is_the_distributions():
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert rerag.__version__ == project["version"]
