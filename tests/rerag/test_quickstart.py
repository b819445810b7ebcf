"""The README's first run, end to end: `rerag fit --config configs/quickstart.yaml` trains,
validates, saves a checkpoint that `rerag export` reads, tests it and writes its metrics."""

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_the_quickstart_config_runs_the_whole_pipeline(tmp_path):
    env_run = dict(cwd=tmp_path, capture_output=True, text=True, timeout=900)
    fit = subprocess.run([sys.executable, "-m", "rerag", "fit", "--config", "rerag:configs/quickstart.yaml"], **env_run)
    assert fit.returncode == 0, fit.stderr[-3000:]
    out = tmp_path / "outputs" / "quickstart"
    metrics = json.loads((out / "test_metrics.json").read_text())
    assert metrics["global_step"] == 40 and 0 <= metrics["test/re_recall@1"] <= 1 and "test/em" in metrics
    assert len((out / "test_results.jsonl").read_text().splitlines()) == 40  # every test question
    checkpoint = out / "checkpoints" / "last.ckpt"
    export = subprocess.run(
        [sys.executable, "-m", "rerag", "export", "--checkpoint", str(checkpoint), "--out", str(out / "export")],
        **env_run,
    )
    assert export.returncode == 0, export.stderr[-3000:]
    card = (out / "export" / "estimator" / "README.md").read_text()
    assert f"{metrics['test/re_recall@1']:.4f}" in card  # the card carries the run's own metrics
