"""Lightning callbacks of the package."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import lightning as L
import torch

from erag.progress import default_interval, progress_line


class MetricsWriter(L.Callback):
    """When testing ends, write the test metrics (`test/*`) to a JSON file and, with `results`, one
    line per test question (`RERAGModule.results["test"]`: answers, EM, F1, first relevant ranks) to a
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"global_step": trainer.global_step, **metrics}, indent=2) + "\n")
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
