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
