"""A `rerag fit` config (YAML plus `--section.field value` overrides) parsed into its trainer,
LightningModule and datamodule: `RERAGCLI`, the LightningCLI behind `rerag fit | validate | test |
predict`, and `build_fit`, the same parse without running, for code that drives a fit itself
(`rerag reproduce`, benchmarks)."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path
from typing import Literal

import torch
import yaml
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities import rank_zero_info

from rerag.assembly import AssemblySpec, generator_spec
from rerag.callbacks import ProgressLines, ValidationSchedule, tested_step
from rerag.data.datamodule import RERAGDataModule
from rerag.evaluation import EvaluationSpec
from rerag.inputs import InputSpec
from rerag.losses import LossSpec
from rerag.models.loading import ModelSpec
from rerag.module import RERAGModule, check_checkpoint_version
from rerag.optimization import OptimizerSpec


def _trusts_remote_code(spec) -> bool:
    """A parsed `ModelSpec` field's trust_remote_code: a plain group, a `class_path`/`init_args` one
    (an optional spec), or None."""
    return bool(getattr(getattr(spec, "init_args", spec), "trust_remote_code", False))


#: The settings rerag 0.2 removed, and what replaces each (docs/migration.md).
REMOVED_SETTINGS = {
    "model.freeze_generator": "model.stages: [{train: estimator, re_learns_from: teacher}]",
    "model.teacher_steps": "model.stages: [{steps: N, train: estimator, re_learns_from: teacher}, {train: both}]",
    "model.generator_steps": (
        "model.stages: [{steps: N, train: generator, marginalize_with: retriever}, "
        "{train: estimator, re_learns_from: teacher}]"
    ),
    "model.generator_schedule_from_teacher_steps": "model.stages[i].schedule (run: each model's schedule spans its stages)",
    "model.marginalize_with": "model.stages[i].marginalize_with",
    "model.objective": "model.stages: [{train: estimator, re_learns_from: labels}] for pointwise",
    "data.init_args.skip_short_train_contexts": "nothing (a dropped setting, docs/research.md)",
}

#: The flat model settings rerag 0.2 gathered into typed groups, and the group field that holds each now.
MOVED_SETTINGS = {
    **{f.name: f"inputs.{f.name}" for f in dataclasses.fields(InputSpec)},
    **{f.name: f"loss.{f.name}" for f in dataclasses.fields(LossSpec) if f.name != "normalized"},
    "normalize_re": "loss.normalized",
    **{f.name: f"optimizer.{f.name}" for f in dataclasses.fields(OptimizerSpec) if f.name != "clip_per_model"},
    "gradient_clip_per_model": "optimizer.clip_per_model",
    **{f.name: f"assembly.{f.name}" for f in dataclasses.fields(AssemblySpec)},
    "teacher_cache_dir": "teacher.cache_dir",
    **{f"teacher_{name}": f"teacher.{name}" for name in ("tokenizer", "template", "question_template")},
    **{f.name: f"evaluation.{f.name}" for f in dataclasses.fields(EvaluationSpec)},
}
REMOVED_SETTINGS |= {f"model.{old}": f"model.{new}" for old, new in MOVED_SETTINGS.items()}
# the datamodule reads model.inputs, linked; model.teacher was the other LM's spec, now its group's `model`
REMOVED_SETTINGS |= {f"model.teacher.{f.name}": f"model.teacher.model.{f.name}" for f in dataclasses.fields(ModelSpec)}
REMOVED_SETTINGS |= {f"data.init_args.{f.name}": f"model.inputs.{f.name}" for f in dataclasses.fields(InputSpec)}


def check_removed_settings(args: list[str]) -> None:
    """Name each setting rerag 0.2 removed that a config file or an argument gives, with what replaces it."""
    given = []
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name == "--config":
            path = value or (args[i + 1] if i + 1 < len(args) else "")
            config = yaml.safe_load(Path(path).read_text()) if Path(path).is_file() else None
            given += [(f"{path}: {key}", key) for key in _keys(config)]
        elif name.startswith("--"):
            given.append((name, name[2:]))
    if found := [f"{where} -> {REMOVED_SETTINGS[key]}" for where, key in given if key in REMOVED_SETTINGS]:
        raise ValueError("settings removed in rerag 0.2 (docs/migration.md): " + "; ".join(found))


def _keys(config, prefix: str = "") -> list[str]:
    """The dotted keys of a config's nested mappings (`model.teacher_steps`, `data.init_args.seed` ...)."""
    if not isinstance(config, dict):
        return []
    return [k for key, value in config.items() for k in (f"{prefix}{key}", *_keys(value, f"{prefix}{key}."))]


class RERAGCLI(LightningCLI):
    def parse_arguments(self, parser, args) -> None:
        check_removed_settings(list(sys.argv[1:] if args is None else args))
        super().parse_arguments(parser, args)

    def add_arguments_to_parser(self, parser) -> None:
        # The datamodule tokenizes with the models' tokenizers and text settings, declared once, and
        # loads those tokenizers with the same trust in their code.
        parser.link_arguments("model.inputs", "data.init_args.inputs")
        parser.link_arguments("model.estimator", "data.init_args.re_trust_remote_code", _trusts_remote_code)
        parser.link_arguments(
            ("model.assembly.shared_base", "model.estimator", "model.generator"),
            "data.init_args.generator_trust_remote_code",
            lambda *specs: _trusts_remote_code(generator_spec(*specs)),
        )
        parser.add_argument(
            "--test_after_fit",
            type=bool,
            default=False,
            help="after fit, run test on the weights test_weights names",
        )
        parser.add_argument(
            "--test_weights",
            type=Literal["best", "final"],
            default="best",
            help="the weights test_after_fit tests: best (the checkpoint callback's best by its monitor; with "
            "monitor null its latest, the final weights) or final (the weights the fit ended with)",
        )
        parser.add_argument(
            "--allow_emulated_bf16",
            type=bool,
            default=False,
            help="keep a bf16 precision on a CPU without bf16 instructions (emulated: slower than the float32 run instead)",
        )
        # Always on: newline progress lines when stdout is a file (a scheduler's log), nothing on a terminal.
        parser.add_lightning_class_args(ProgressLines, "progress")
        # Always on: validation in optimizer steps (`--validation.every_n_steps`), and always after the last step.
        parser.add_lightning_class_args(ValidationSchedule, "validation")

    def _parse_ckpt_path(self) -> None:
        # LightningCLI replaces the model's settings with a --ckpt_path checkpoint's hyperparameters,
        # those the config or the command line set too. The settings that only shape evaluation are
        # taken back from the config and command line (`rerag test --model.evaluation.test_top_k 3` tests with 3);
        # each other one replaced is named, rather than ignored silently.
        subcommand = self.config.get("subcommand")
        if not subcommand or not self.config[subcommand].get("ckpt_path"):
            return super()._parse_ckpt_path()
        path = self.config[subcommand].ckpt_path
        check_checkpoint_version(torch.load(path, map_location="cpu", weights_only=False, mmap=True), path)
        asked = self.config[subcommand].model.as_dict()
        super()._parse_ckpt_path()
        replaced = replaced_settings(asked, self.config[subcommand].model.as_dict())
        if any(k.startswith("evaluation.") for k in replaced):  # model.evaluation shapes evaluation only
            self.config = self.parser.parse_object(
                {subcommand: {"model": {"evaluation": asked["evaluation"]}}}, self.config
            )
        if replaced := {k: v for k, v in replaced.items() if not k.startswith("evaluation.")}:
            listed = "; ".join(f"model.{k}: {v!r} -> {r!r}" for k, (v, r) in replaced.items())
            warnings.warn(
                f"--ckpt_path: the checkpoint's hyperparameters replace these settings of the config and "
                f"command line: {listed}",
                stacklevel=2,
            )

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        check_data_files(config.data.init_args, self.subcommand or "fit")
        float32_where_bf16_is_emulated(config)
        if not sys.stdout.isatty():  # ProgressLines reports instead of the bar
            config.trainer.enable_progress_bar = False

    def after_fit(self) -> None:
        if not self.config.fit.get("test_after_fit"):
            return
        ckpt = self.trainer.checkpoint_callback
        best = getattr(ckpt, "best_model_path", "") or None
        path = best if self.config.fit.get("test_weights") == "best" else None
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=path)
        step = tested_step(self.trainer, self.model)
        rank_zero_info(f"test_after_fit: tested the weights of optimizer step {step} ({path or 'final, in memory'})")


def replaced_settings(asked: dict, restored: dict) -> dict[str, tuple]:
    """The model settings whose value in `asked` (the config and command line) differs from
    `restored` (after a checkpoint's hyperparameters were applied), by dotted key within a group:
    `loss.alpha_re` -> (asked, restored). A group set on one side and null on the other (`teacher`,
    `assembly.estimator_lora`) is named whole."""
    replaced = {}
    for key, value in asked.items():
        if key not in restored:
            continue
        if isinstance(value, dict) and isinstance(restored[key], dict):
            replaced |= {f"{key}.{k}": pair for k, pair in replaced_settings(value, restored[key]).items()}
        elif restored[key] != value:
            replaced[key] = (value, restored[key])
    return replaced


#: The data files each subcommand reads; a missing one stops it before any model is loaded.
STAGE_FILES = {
    "fit": ("train_file", "val_file"),
    "validate": ("val_file",),
    "test": ("test_file",),
    "predict": ("predict_file",),
}


def check_data_files(data, subcommand: str) -> None:
    """Raise `FileNotFoundError` naming the field (`data.init_args.train_file`) and the path of a data
    file the subcommand would read and that is not there. The demo datamodule writes its own world,
    so a file it has no field for is not asked for."""
    for field in STAGE_FILES.get(subcommand, ()):
        path = data.get(field) if hasattr(data, "get") else None
        if path and not Path(path).is_file():
            raise FileNotFoundError(f"data.init_args.{field}: no such file: {path}")


def cpu_computes_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU has bf16 instructions (AVX512-BF16 or AMX), from its flags in `cpuinfo`; None
    where the file cannot be read (not Linux)."""
    try:
        flags = Path(cpuinfo).read_text().split()
    except OSError:
        return None
    return "avx512_bf16" in flags or "amx_bf16" in flags


def float32_where_bf16_is_emulated(config, cpuinfo: str | Path = "/proc/cpuinfo") -> None:
    """Switch a run on a CPU without bf16 instructions from a bf16 precision to float32: trainer
    precision 32-true and the models' bf16 weights loaded in float32 (`dtype` null), and warn saying
    so. oneDNN emulates bf16 matmuls there, slower than float32. `allow_emulated_bf16` keeps bf16."""
    trainer = config.trainer
    on_cpu = trainer.get("accelerator") == "cpu" or (
        trainer.get("accelerator") == "auto" and not torch.cuda.is_available()
    )
    precision = str(trainer.get("precision"))
    if config.get("allow_emulated_bf16") or not (on_cpu and precision.startswith("bf16")):
        return
    if cpu_computes_bf16(cpuinfo) is not False:
        return
    trainer.precision = "32-true"
    changed = [f"trainer.precision {precision} -> 32-true"]
    teacher = config.model.get("teacher")
    for field, spec in (
        ("estimator", config.model.get("estimator")),
        ("generator", config.model.get("generator")),
        ("teacher.model", teacher.get("model") if teacher is not None else None),
    ):
        spec = getattr(spec, "init_args", spec)
        if spec is not None and str(spec.get("dtype")) in ("bfloat16", "float16"):
            changed.append(f"model.{field}.dtype {spec.dtype} -> null")
            spec.dtype = None
    warnings.warn(
        "a CPU without bf16 instructions (no avx512_bf16 or amx_bf16 in /proc/cpuinfo) emulates bf16, slower "
        f"than float32: running in float32 ({'; '.join(changed)}); --allow_emulated_bf16 true keeps bf16",
        stacklevel=2,
    )


#: No prefix abbreviations (`--trainer.max_step 10` is an error, not a silent `max_steps`); a parse
#: error is raised (`argparse.ArgumentError`), for the CLI to print in one line, not a page of usage.
PARSER_KWARGS = {"allow_abbrev": False, "exit_on_error": False}


def _rerag_cli(args: list[str], **kwargs) -> RERAGCLI:
    with warnings.catch_warnings():  # args are an argv the caller passes on, which LightningCLI would flag
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        return RERAGCLI(
            RERAGModule, RERAGDataModule, subclass_mode_data=True, args=args, parser_kwargs=PARSER_KWARGS, **kwargs
        )


def build_fit(args: list[str]) -> RERAGCLI:
    """A fit config parsed and its trainer, module and datamodule built (`.trainer`, `.model`,
    `.datamodule`, `.config`), not run."""
    return _rerag_cli(args, run=False)


def run_cli(args: list[str]) -> RERAGCLI:
    """`rerag fit | validate | test | predict` with `args` (the subcommand and its arguments)."""
    return _rerag_cli(args, save_config_kwargs={"overwrite": True})
