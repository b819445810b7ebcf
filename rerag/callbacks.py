"""Lightning callbacks of the package."""
from __future__ import annotations

import json
from pathlib import Path

import lightning as L


class MetricsWriter(L.Callback):
    """Write the test metrics (`test/*`) to a JSON file when testing ends (rank zero only)."""

    def __init__(self, path: str = "outputs/test_metrics.json"):
        self.path = Path(path)

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("test/")}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"global_step": trainer.global_step, **metrics}, indent=2) + "\n")


class LearningCurve(L.Callback):
    """Record chosen validation metrics at every validation and draw them against the global
    step: `<path>.json` holds the points, `<path>.png` the plot (rewritten at each validation,
    so an interrupted run keeps its curve; rank zero only). A sanity check over the whole dev set
    (`trainer.num_sanity_val_steps: -1`) is step 0, the untrained models; a partial one is left out."""

    def __init__(self, path: str = "outputs/learning_curve",
                 metrics: dict[str, str] | None = None, title: str = "dev set during training"):
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
