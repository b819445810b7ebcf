import json
import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest

from rerag.callbacks import LearningCurve
from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule


def fit_with_curve(module_kwargs, data_kwargs, tmp_path, sanity_steps: int) -> LearningCurve:
    L.seed_everything(0)
    curve = LearningCurve(str(tmp_path / "curve"))
    L.Trainer(
        accelerator="cpu",
        max_steps=4,
        val_check_interval=2,
        num_sanity_val_steps=sanity_steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[curve],
        default_root_dir=tmp_path,
    ).fit(RERAGModule(**module_kwargs), datamodule=RERAGDataModule(**data_kwargs))
    return curve


def test_a_partial_sanity_check_is_not_a_point(module_kwargs, data_kwargs, tmp_path):
    curve = fit_with_curve(module_kwargs, data_kwargs, tmp_path, sanity_steps=1)
    assert [p["step"] for p in curve.points] == [2, 4]


def test_learning_curve_records_every_validation_and_draws_it(module_kwargs, data_kwargs, tmp_path):
    curve = fit_with_curve(module_kwargs, data_kwargs, tmp_path, sanity_steps=-1)
    points = json.loads((tmp_path / "curve.json").read_text())
    assert [p["step"] for p in points] == [0, 2, 4]  # a full sanity check is the untrained step 0
    assert len({p["val/retriever_recall@1"] for p in points}) == 1  # every point saw the whole dev set
    for p in points:
        assert 0.0 <= p["val/re_recall@1"] <= 1.0 and 0.0 <= p["val/retriever_recall@1"] <= 1.0
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    restored = LearningCurve(str(tmp_path / "other"))
    restored.load_state_dict(curve.state_dict())
    assert restored.points == points


@pytest.mark.slow
def test_demo_cli_writes_progress_lines_to_a_log_file(tmp_path):
    # A scheduler's view: stdout is a file. Expect timed newline progress lines, no \r redraws, and
    # the demo's test after fit.
    root = Path(__file__).resolve().parents[2]
    out, data = tmp_path / "out", tmp_path / "data"
    log = tmp_path / "log.txt"
    command = [
        sys.executable,
        "-m",
        "rerag",
        "fit",
        "--config",
        str(root / "configs" / "demo.yaml"),
        "--trainer.max_steps",
        "6",
        "--trainer.val_check_interval",
        "3",
        "--test_after_fit",
        "true",
        "--trainer.default_root_dir",
        str(out),
        "--trainer.logger",
        "false",
        "--trainer.callbacks",
        "[]",
        "--trainer.enable_checkpointing",
        "false",
        "--progress.interval",
        "0.2",
        "--data.init_args.data_dir",
        str(data),
        "--data.init_args.world.n_train_people",
        "10",
        "--data.init_args.world.n_dev_people",
        "2",
        "--data.init_args.world.n_test_people",
        "2",
    ]
    with open(log, "w") as f:
        subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, check=True, timeout=600, cwd=tmp_path)
    text = log.read_text()
    assert "\r" not in text
    fit_lines = [line for line in text.splitlines() if line.startswith("[fit] ")]
    assert len(fit_lines) >= 3, text[-3000:]
    assert all(re.search(r"\d+/6 steps .* steps/s \| elapsed .* \| ETA .* train/loss ", line) for line in fit_lines)
    assert sum(line.startswith("[val] step ") and "val/re_recall@1" in line for line in text.splitlines()) >= 2
    assert "test/re_recall@1" in text  # --test_after_fit ran the test split after fit
