"""Lightning callbacks of the package."""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from erag.progress import default_interval, progress_line


def unreachable(trainer: L.Trainer, points: Iterable[tuple[str, int]]) -> None:
    """Warn, naming each, of the optimizer steps in `points` ((the setting, its step) pairs) that this
    fit does not reach: it ends at `trainer.estimated_stepping_batches` (max_steps, or max_epochs first)."""
    end = trainer.estimated_stepping_batches
    if missed := [(name, step) for name, step in points if step > end]:
        listed = ", ".join(f"{name} {step}" for name, step in missed)
        warnings.warn(f"this fit ends at optimizer step {end} and never reaches {listed}", stacklevel=2)


def tested_step(trainer: L.Trainer, pl_module: L.LightningModule) -> int | None:
    """The optimizer step of the weights being evaluated: a checkpoint's (`trainer.ckpt_path`, read by
    the module's `on_load_checkpoint` into `checkpoint_step`), else the trainer's."""
    if trainer.ckpt_path is None:
        return trainer.global_step
    return getattr(pl_module, "checkpoint_step", None)


class ValidationSchedule(L.Callback):
    """Validation planned in optimizer steps. Lightning's `val_check_interval` counts training
    batches, and an epoch whose batch count is not a multiple of `accumulate_grad_batches` ends with a
    short accumulation that still steps the optimizer: from then on batches no longer map to steps,
    and `max_steps` can arrive before the batch a validation was planned at (which then never runs).
    This callback validates right after the optimizer steps it plans: every `every_n_steps`, at each
    of `at_steps`, at the module's stage ends (`at_stage_ends`: its `stage_ends()`, e.g. the RE-RAG
    module's `stages`), and always after the fit's last step, so a checkpoint callback saves
    the final weights. With none of the three set it plans nothing: Lightning's
    `val_check_interval` decides, and only the validation after the last step is added. A planned
    step (or `max_steps`) this fit never reaches is warned of at its start."""

    def __init__(self, every_n_steps: int | None = None, at_steps: list[int] = [], at_stage_ends: bool = False):
        """
        Args:
            every_n_steps: validate after every this many optimizer steps (None: not by a period).
            at_steps: validate after each of these optimizer steps.
            at_stage_ends: validate after the last step of each of the module's stages.
        """
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(f"validation.every_n_steps: must be at least 1 or null, got {every_n_steps}")
        if any(step < 1 for step in at_steps):
            raise ValueError(f"validation.at_steps: optimizer steps are at least 1, got {at_steps}")
        self.every_n_steps, self.at_steps, self.at_stage_ends = every_n_steps, sorted(set(at_steps)), at_stage_ends
        self._batches = None  # Lightning's own val_check_batch, restored after a batch this callback forces
        self._step = 0  # the optimizer step before the current batch

    @property
    def plans(self) -> bool:
        return self.every_n_steps is not None or bool(self.at_steps) or self.at_stage_ends

    def is_planned(self, pl_module: L.LightningModule, step: int) -> bool:
        if self.every_n_steps is not None and step % self.every_n_steps == 0:
            return True
        stage_ends = getattr(pl_module, "stage_ends", dict)().values() if self.at_stage_ends else ()
        return step in self.at_steps or step in stage_ends

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != "fit" or not self.plans:
            return
        if trainer.check_val_every_n_epoch != 1 or trainer.val_check_interval != 1.0:
            raise ValueError(
                "validation.every_n_steps / at_steps / at_stage_ends plan validation in optimizer steps, and "
                f"trainer.val_check_interval ({trainer.val_check_interval}) or check_val_every_n_epoch "
                f"({trainer.check_val_every_n_epoch}) in training batches or epochs: leave those two unset"
            )
        # Not by epochs: the loop then counts batches over the fit, and ModelCheckpoint saves at each
        # validation's end (by epochs, it would save at each epoch's end instead).
        trainer.check_val_every_n_epoch = None

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit" and self.plans:
            trainer.check_val_every_n_epoch = 1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._batches = trainer.val_check_batch
        if self.plans:
            trainer.val_check_batch = sys.maxsize  # a resumed fit's first check too: none but those planned here
        unreachable(trainer, [("validation.at_steps", step) for step in self.at_steps])
        if trainer.max_steps > 0:
            unreachable(trainer, [("trainer.max_steps", trainer.max_steps)])

    def on_train_batch_start(self, trainer: L.Trainer, pl_module, batch, batch_idx: int) -> None:
        self._step = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        """Set Lightning's `val_check_batch`, which the training loop reads right after this hook, so
        that its check `(batch_idx + 1) % val_check_batch == 0` holds after a planned step alone."""
        step = trainer.global_step
        stepped = step != self._step
        last = stepped and (
            step >= trainer.max_steps > 0
            or (batch_idx + 1 >= trainer.num_training_batches and trainer.current_epoch + 1 >= trainer.max_epochs > 0)
        )
        if last or (stepped and self.plans and self.is_planned(pl_module, step)):
            loop = trainer.fit_loop.epoch_loop  # the batch count the loop checks: over the fit, or the epoch's
            trainer.val_check_batch = 1 + (
                loop.total_batch_idx if trainer.check_val_every_n_epoch is None else batch_idx
            )
        else:
            trainer.val_check_batch = sys.maxsize if self.plans else self._batches


class LaterOnTiesCheckpoint(ModelCheckpoint):
    """Lightning's `ModelCheckpoint` whose ties on the monitored metric go to the later step: on a
    few dev questions equal scores are common, and of two equal ones the later weights have trained
    more (Lightning's own keeps the earlier)."""

    def check_monitor_top_k(self, trainer: L.Trainer, current: torch.Tensor | None = None) -> bool:
        if current is None or self.save_top_k == -1 or len(self.best_k_models) < self.save_top_k:
            return super().check_monitor_top_k(trainer, current)
        at_least = {"min": torch.le, "max": torch.ge}[self.mode]
        better = bool(at_least(current, self.best_k_models[self.kth_best_model_path]))
        return trainer.strategy.reduce_boolean_decision(better)


class MetricsWriter(L.Callback):
    """When testing ends, write the test metrics (`test/*`), with the tested weights' optimizer step
    (`global_step`) and checkpoint (`checkpoint`: null for the weights in memory), to a JSON file
    and, with `results`, one line per test question (`RERAGModule.results["test"]`: answers, EM, F1, first relevant ranks) to a
    JSONL file, the input of `rerag compare` (gathered from every process; rank zero writes)."""

    def __init__(self, path: str = "outputs/test_metrics.json", results: str | None = None):
        self.path = Path(path)
        self.results = None if results is None else Path(results)

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        rows = getattr(pl_module, "results", {}).get("test", [])
        if self.results is not None and trainer.world_size > 1:
            shares = [None] * trainer.world_size
            torch.distributed.all_gather_object(shares, rows)
            rows = [r for share in shares for r in share]
        if not trainer.is_global_zero:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("test/")}
        path = trainer.ckpt_path
        tested = {"global_step": tested_step(trainer, pl_module), "checkpoint": None if path is None else str(path)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(tested | metrics, indent=2) + "\n")
        if self.results is not None:
            self.results.parent.mkdir(parents=True, exist_ok=True)
            rows = sorted(rows, key=lambda r: r["index"])
            self.results.write_text("".join(json.dumps(r) + "\n" for r in rows))


class LearningCurve(L.Callback):
    """Record chosen validation metrics at every validation and draw them against the global
    step: `<path>.json` holds the points, `<path>.png` the plot (rewritten at each validation,
    so an interrupted run keeps its curve; rank zero only). A sanity check over the whole dev set
    (`trainer.num_sanity_val_steps: -1`) is step 0, the untrained models; a partial one is left out."""

    def __init__(
        self,
        path: str = "outputs/learning_curve",
        metrics: dict[str, str] | None = None,
        title: str = "dev set during training",
    ):
        self.path = Path(path)
        self.metrics = metrics or {"val/re_recall@1": "RE Recall@1", "val/retriever_recall@1": "BM25 Recall@1"}
        self.title = title
        self.points: list[dict[str, float]] = []

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        partial_sanity_check = trainer.sanity_checking and trainer.num_sanity_val_batches != trainer.num_val_batches
        if not trainer.is_global_zero or partial_sanity_check:
            return
        logged = trainer.callback_metrics
        point = {name: float(logged[name]) for name in self.metrics if name in logged}
        if point:
            self.points.append({"step": trainer.global_step, **point})
            self.write()

    def write(self) -> None:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.with_suffix(".json").write_text(json.dumps(self.points, indent=2) + "\n")
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for name, label in self.metrics.items():
            steps = [p["step"] for p in self.points if name in p]
            ax.plot(steps, [p[name] for p in self.points if name in p], marker="o", label=label)
        ax.set(xlabel="training step", ylabel="value", title=self.title, ylim=(0, 1))
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(self.path.with_suffix(".png"), dpi=120)
        plt.close(fig)

    def state_dict(self) -> dict:
        return {"points": self.points}  # a resumed run continues the same curve

    def load_state_dict(self, state_dict: dict) -> None:
        self.points = list(state_dict["points"])


class ProgressLines(L.Callback):
    """Progress for logs: when stdout is not a terminal (a scheduler writing it to a file), print a
    newline-terminated line on rank 0 every `interval` seconds (default $RERAG_PROGRESS_INTERVAL,
    else 30) while fitting, validating, testing or predicting: step, rate, ETA, the latest
    losses, and the metrics at the end of each validation. On a terminal it does nothing (the
    progress bar shows the same). `rerag` adds it to every run (`--progress.interval`)."""

    def __init__(self, interval: float | None = None):
        self.interval = default_interval() if interval is None else interval
        self._start: dict[str, float] = {}
        self._last = 0.0

    def _active(self, trainer: L.Trainer) -> bool:
        return trainer.is_global_zero and not sys.stdout.isatty()

    def _begin(self, stage: str) -> None:
        self._start[stage] = self._last = time.monotonic()

    def _report(
        self, trainer: L.Trainer, stage: str, done: int, total: int | float, unit: str, prefix: str, force: bool = False
    ) -> None:
        now = time.monotonic()
        if not self._active(trainer) or (not force and now - self._last < self.interval):
            return
        extra = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith(prefix) and v.numel() == 1}
        total = int(total) if total not in (None, float("inf")) else None
        print(progress_line(stage, done, total, now - self._start[stage], unit, extra), flush=True)
        self._last = now

    def on_train_start(self, trainer, pl_module) -> None:
        self._begin("fit")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._report(trainer, "fit", trainer.global_step, trainer.estimated_stepping_batches, "steps", "train/")

    def _eval_batch(self, trainer, stage: str, batch_idx: int, dataloader_idx: int, totals) -> None:
        total = totals[dataloader_idx] if isinstance(totals, list) else totals
        self._report(trainer, stage, batch_idx + 1, total, "batches", f"{stage}/")

    def on_validation_start(self, trainer, pl_module) -> None:
        self._begin("val")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._eval_batch(trainer, "val", batch_idx, dataloader_idx, trainer.num_val_batches)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._active(trainer):
            metrics = " | ".join(
                f"{k} {float(v):.4g}"
                for k, v in sorted(trainer.callback_metrics.items())
                if k.startswith("val/") and v.numel() == 1
            )
            print(
                f"[val] step {trainer.global_step} done in {time.monotonic() - self._start['val']:.1f} s | {metrics}",
                flush=True,
            )

    def on_test_start(self, trainer, pl_module) -> None:
        self._begin("test")

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._eval_batch(trainer, "test", batch_idx, dataloader_idx, trainer.num_test_batches)

    def on_predict_start(self, trainer, pl_module) -> None:
        self._begin("predict")

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._eval_batch(trainer, "predict", batch_idx, dataloader_idx, trainer.num_predict_batches)
