"""Does an RE setting learn at all? The RE alone against a frozen teacher, for any fit config.

Runs `rerag fit` of the config (arguments after `--` override it as in `rerag fit`, after this
script's own settings) with the generator frozen and its F_ij (eq. 8) cached:
a one-stage `model.stages` (the RE alone, `re_learns_from: teacher`) and `model.teacher.cache_dir` (`--teacher-cache`; `rerag.teacher_cache`)
score every training (question, answer, context) once at fit start, and a later run with the same
teacher, data and prompt reads them back. Only the RE trains (`rerag.optimization.estimator_parameters`,
the config's `model.optimizer.estimator_lr`, accumulation and clipping) on L_gen + L_re + L_tok (eq. 12). The
teacher is the config's generator, or `--teacher` (`model.teacher.model`): any Hugging Face LM, such as
the `generator` folder that `rerag export` writes of a joint run's checkpoint (merged: with a
shared-base config the frozen generator is the bare base, so a trained generator teaches only
this way). Prints the module's own dev metrics (`val/re_recall@1`, `val/retriever_recall@1`, and
the `gold` ones when the data has them) at step 0 (the untrained RE, a sanity check over the dev
questions) and every `--eval-every` optimizer steps. The config's loggers, checkpoints and
callbacks are left out: the run writes only the teacher cache, and with `--save` the joint
checkpoint `--checkpoint` with its RE replaced by the one trained here, for `rerag test
--ckpt_path`, `rerag export` and `predict-file`; `--resume` starts the RE from such a file.
It tries any RE the config can build: a LoRA adapter on a causal LM included.

    rerag export --checkpoint outputs/squad_smollm2/checkpoints/final.ckpt --out outputs/squad_smollm2/export
    python benchmarks/re_alone.py --config configs/squad_smollm2_base.yaml configs/squad_smollm2.yaml \\
        --teacher outputs/squad_smollm2/export/generator --teacher-cache outputs/teacher_cache \\
        --steps 60 --eval-every 20 --dev-questions 30 -- --model.assembly.estimator_lora.layers_to_transform null
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.cli import SaveConfigCallback

from rerag.callbacks import ValidationSchedule
from rerag.fit_config import RERAGCLI, build_fit

#: The RE's settings, by group of `model` (None: a setting of its own): what `--save` takes from this run
#: into the joint checkpoint's (the rest of each group, and every other setting, stays the joint run's).
RE_SETTINGS = {
    None: ("estimator",),
    "inputs": ("re_tokenizer", "re_template", "re_max_length", "true_word", "false_word"),
    "assembly": ("estimator_lora",),
}


def frozen_teacher_overrides(cache_dir: Path, steps: int) -> list[str]:
    """`rerag fit` arguments for the RE alone against the frozen generator's cached F_ij, `steps`
    optimizer steps, a dev pass before training (step 0) and nothing written but the cache. The
    generator answers only at validation, from its top context: dev EM is not what is measured."""
    return [
        *("--model.stages", json.dumps([{"train": "estimator", "re_learns_from": "teacher"}])),
        *("--model.assembly.generator_lora", "null"),
        *("--model.teacher.cache_dir", str(cache_dir), "--model.evaluation.val_top_k", "1"),
        *("--trainer.max_steps", str(steps)),
        *("--trainer.num_sanity_val_steps", "-1", "--trainer.logger", "false"),
        *("--trainer.enable_checkpointing", "false", "--trainer.callbacks", "[]"),
        *("--trainer.enable_model_summary", "false"),
    ]


def build(config: list[Path], overrides: list[str]) -> RERAGCLI:
    """The config's trainer, module and datamodule, as `rerag fit` builds them with `overrides`,
    without the config file the CLI would write into the run's folder."""
    cli = build_fit([*(a for c in config for a in ("--config", str(c))), *overrides])
    cli.trainer.callbacks[:] = [c for c in cli.trainer.callbacks if not isinstance(c, SaveConfigCallback)]
    return cli


class DevCurve(L.Callback):
    """At every validation (the step-0 sanity check over the whole dev set included, a partial one
    left out), a point: the step, training minutes so far (the steps alone: no validation, no
    teacher cache), the mean train/loss_re of the batches since the last point, the module's
    logged dev metrics (`val/...` without the prefix) and `extra(module)`'s."""

    def __init__(self, extra: Callable[[L.LightningModule], dict[str, float]] | None = None):
        self.extra, self.points = extra, []
        self.train_seconds, self.losses, self._tick = 0.0, [], 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._tick = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.train_seconds += time.perf_counter() - self._tick
        if "train/loss_re" in trainer.callback_metrics:
            self.losses.append(float(trainer.callback_metrics["train/loss_re"]))

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking and trainer.num_sanity_val_batches != trainer.num_val_batches:
            return
        logged = {
            k[4:]: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/") and v.numel() == 1
        }
        point = {
            "step": trainer.global_step,
            "minutes": self.train_seconds / 60,
            "loss_re": sum(self.losses) / len(self.losses) if self.losses else float("nan"),
            **logged,
            **(self.extra(pl_module) if self.extra else {}),
        }
        self.points.append(point)
        self.losses = []
        shown = {k: round(v, 3) for k, v in point.items() if k.endswith("recall@1") and "/" not in k}
        print(f"step {point['step']}: {shown}", flush=True)


def fit(
    cli: RERAGCLI,
    eval_every: int,
    dev_batches: int | None = None,
    extra: Callable[[L.LightningModule], dict[str, float]] | None = None,
) -> list[dict]:
    """Fit `cli`'s module (built with `frozen_teacher_overrides`), validating every `eval_every`
    optimizer steps and after the last, on `dev_batches` dev batches (None: the config's
    `limit_val_batches`); returns the `DevCurve` points, step 0 first."""
    trainer = cli.trainer
    (schedule,) = [c for c in trainer.callbacks if isinstance(c, ValidationSchedule)]
    schedule.every_n_steps = eval_every  # and after the last step
    if dev_batches is not None:
        trainer.limit_val_batches = dev_batches
    curve = DevCurve(extra)
    trainer.callbacks.append(curve)
    trainer.fit(cli.model, datamodule=cli.datamodule)
    return curve.points


def re_keys(module) -> Callable[[str], bool]:
    """Whether a state-dict key is the RE's: its adapter's on a shared base, else its own model's."""
    adapter = module.estimator.adapter
    return (lambda key: f".{adapter}." in key) if adapter else (lambda key: key.startswith("estimator."))


def load_estimator(module, checkpoint: Path) -> int:
    """Copy the RE's weights of a `--save`d checkpoint into `module`; returns how many tensors."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    is_re, own = re_keys(module), module.state_dict()
    wanted = {k: v for k, v in state.items() if is_re(k)}
    differ = [k for k in wanted if k not in own or own[k].shape != wanted[k].shape]
    if not wanted or differ:
        raise SystemExit(
            f"{checkpoint}: no RE weights matching this config's ({len(differ)} of {len(wanted)} differ, e.g. {differ[:2]})"
        )
    module.load_state_dict(wanted, strict=False)
    return len(wanted)


def with_re_settings(joint: dict, trained: dict) -> dict:
    """The joint run's hyperparameters `joint` with the RE's settings (`RE_SETTINGS`) of `trained`; a
    group (`model.inputs`, `model.assembly`) may be a dict, as the CLI saves it, or its spec dataclass."""

    def field(group, name):
        return group[name] if isinstance(group, dict) else getattr(group, name)

    merged = dict(joint)
    for group, names in RE_SETTINGS.items():
        if group is None:
            merged |= {name: trained[name] for name in names}
            continue
        values = {name: field(trained[group], name) for name in names}
        held = merged[group]
        merged[group] = dataclasses.replace(held, **values) if dataclasses.is_dataclass(held) else {**held, **values}
    return merged


def save_with_estimator(module, checkpoint: Path, out: Path) -> None:
    """Write fit checkpoint `checkpoint` (the joint run's) with its RE replaced by `module`'s, weights
    and settings (`RE_SETTINGS`; the rest, its generator's included, stay the joint run's), for
    `rerag test --ckpt_path`, `rerag export` and `predict-file` with the joint config. Its optimizer
    state is dropped: the file evaluates, it does not resume."""
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=False)
    is_re = re_keys(module)
    kept = {k: v for k, v in ckpt["state_dict"].items() if not is_re(k)}
    ckpt["state_dict"] = kept | {k: v for k, v in module.state_dict().items() if is_re(k)}
    ckpt["hyper_parameters"] = with_re_settings(dict(ckpt.get("hyper_parameters", {})), module.hparams)
    for key in ("optimizer_states", "lr_schedulers", "loops"):
        ckpt.pop(key, None)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, out)


def main() -> None:
    argv = sys.argv[1:]
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, nargs="+", required=True, help="`rerag fit` config files, overlays last")
    p.add_argument(
        "--teacher",
        default=None,
        help="the teacher (model.teacher.model.name_or_path): a `rerag export`ed generator folder or any Hugging Face LM "
        "(default: the config's generator, frozen)",
    )
    p.add_argument("--teacher-cache", type=Path, default=Path("outputs/teacher_cache"), help="model.teacher.cache_dir")
    p.add_argument("--steps", type=int, default=100, help="optimizer steps")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument(
        "--dev-questions", type=int, default=50, help="dev questions per validation (rounded up to whole dev batches)"
    )
    p.add_argument(
        "--checkpoint", type=Path, default=None, help="the joint run's fit checkpoint, for --save or --resume"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="--checkpoint is a --save'd file: start from its RE (a fresh optimizer; the data order starts over)",
    )
    p.add_argument(
        "--save",
        type=Path,
        default=None,
        help="write --checkpoint with the RE trained here, for `rerag test --ckpt_path` (with the same overrides)",
    )
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if (args.save or args.resume) and not args.checkpoint:
        p.error("--save and --resume need --checkpoint")

    teacher = ["--model.teacher.model.name_or_path", args.teacher] if args.teacher else []
    cli = build(args.config, [*frozen_teacher_overrides(args.teacher_cache, args.steps), *teacher, *overrides])
    module, data = cli.model, cli.datamodule
    if args.resume:
        print(f"RE: {load_estimator(module, args.checkpoint)} tensors from {args.checkpoint}", flush=True)
    cached_before = set(args.teacher_cache.glob("*.pt"))
    start = time.time()
    points = fit(cli, args.eval_every, math.ceil(args.dev_questions / data.hparams.eval_batch_size))
    if args.save:
        save_with_estimator(module, args.checkpoint, args.save)

    cache = args.teacher_cache / f"{module.teacher_scores.key}.pt"
    names = [
        f"{order}_{relevant}recall@1"
        for relevant in ("", "gold_")
        for order in ("re", "retriever")
        if f"{order}_{relevant}recall@1" in points[0]
    ]
    print(
        f"\nThe RE alone, {args.config[-1].name} {' '.join(overrides)}: dev Recall@1 over "
        f"{data.hparams.n_eval_contexts} contexts ({len(module.results['val'])} questions); teacher "
        f"{module.teacher_model.name_or_path or 'the config generator'}, F_ij of {len(module.teacher_scores)} training "
        f"pairs {'read from' if cache in cached_before else 'written to'} {cache}; {(time.time() - start) / 60:.1f} min\n"
    )
    print("| step | training minutes | mean train/loss_re | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for point in points:
        print(
            f"| {point['step']} | {point['minutes']:.1f} | {point['loss_re']:.3f} | "
            + " | ".join(f"{point[n]:.3f}" for n in names)
            + " |"
        )


if __name__ == "__main__":
    main()
