import json
import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from rerag.callbacks import LaterOnTiesCheckpoint, LearningCurve, MetricsWriter, ValidationSchedule
from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule
from rerag.optimization import OptimizerSpec


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
        "--validation.every_n_steps",
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


# ---- validation in optimizer steps, the weights tested and their step --------------------------------
class Validations(L.Callback):
    """The optimizer step of every validation (sanity checks left out)."""

    def __init__(self):
        self.steps = []

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.steps.append(trainer.global_step)


def fit_by_steps(module_kwargs, data_kwargs, out, callbacks, ckpt_path=None, **trainer_kw) -> L.Trainer:
    """A fit on the tiny world: 48 training questions in batches of 4, 12 batches an epoch."""
    L.seed_everything(0)
    defaults = dict(accumulate_grad_batches=5, max_steps=7, limit_val_batches=1, num_sanity_val_steps=0)
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks),
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        default_root_dir=out,
        **(defaults | trainer_kw),
    )
    trainer.fit(RERAGModule(**module_kwargs), datamodule=RERAGDataModule(**data_kwargs), ckpt_path=ckpt_path)
    return trainer


def test_lightning_alone_drops_the_validation_planned_at_max_steps(module_kwargs, data_kwargs, tmp_path):
    """The fault the schedule mends: 12 batches an epoch in accumulations of 5 step 3 times (5, 5, 2),
    so the 70th batch, planned as step 7's validation, never comes (step 7 is the 29th batch)."""
    seen = Validations()
    fit_by_steps(module_kwargs, data_kwargs, tmp_path, [seen], val_check_interval=10, check_val_every_n_epoch=None)
    assert seen.steps == [2, 4]  # at batches 10 and 20: steps 2 and 4 (mid-accumulation), not 7


@pytest.mark.parametrize("accumulate, max_steps, expected", [(5, 7, [2, 4, 6, 7]), (1, 5, [2, 4, 5])])
def test_validation_follows_optimizer_steps_and_ends_on_the_last(
    module_kwargs, data_kwargs, tmp_path, accumulate, max_steps, expected
):
    seen = Validations()
    final = ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="final")  # monitor None: the latest validation's
    schedule = ValidationSchedule(every_n_steps=2)
    trainer = fit_by_steps(
        module_kwargs,
        data_kwargs,
        tmp_path,
        [schedule, seen, final],
        accumulate_grad_batches=accumulate,
        max_steps=max_steps,
    )
    assert seen.steps == expected
    assert torch.load(tmp_path / "ckpt" / "final.ckpt", weights_only=False)["global_step"] == max_steps

    # the test reads those weights and names their step; an earlier checkpoint's test names its own
    writer = MetricsWriter(str(tmp_path / "metrics.json"))
    trainer.callbacks.append(writer)
    trainer.test(trainer.lightning_module, datamodule=trainer.datamodule, ckpt_path=final.best_model_path)
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["global_step"] == max_steps and written["checkpoint"] == final.best_model_path
    early = tmp_path / "early.ckpt"
    torch.save({**torch.load(final.best_model_path, weights_only=False), "global_step": 2}, early)
    trainer.test(trainer.lightning_module, datamodule=trainer.datamodule, ckpt_path=str(early))
    assert json.loads((tmp_path / "metrics.json").read_text())["global_step"] == 2


def test_stage_ends_and_listed_steps_are_validated(module_kwargs, data_kwargs, tmp_path):
    seen = Validations()
    schedule = ValidationSchedule(at_steps=[1], at_stage_ends=True)
    fit_by_steps(
        {**module_kwargs, "stages": [{"steps": 3, "train": "estimator", "re_learns_from": "teacher"}, {}]},
        data_kwargs,
        tmp_path,
        [schedule, seen],
    )
    assert seen.steps == [1, 3, 7]  # a listed step, the teacher stage's end, the last step


def test_without_a_plan_lightning_decides_and_the_last_step_is_added(module_kwargs, data_kwargs, tmp_path):
    seen = Validations()
    fit_by_steps(
        module_kwargs,
        data_kwargs,
        tmp_path,
        [ValidationSchedule(), seen],
        val_check_interval=10,
        check_val_every_n_epoch=None,
    )
    assert seen.steps == [2, 4, 7]


def test_a_plan_in_steps_beside_one_in_batches_is_refused(module_kwargs, data_kwargs, tmp_path):
    with pytest.raises(ValueError, match=r"trainer\.val_check_interval \(10\) .* leave those two unset"):
        fit_by_steps(
            module_kwargs,
            data_kwargs,
            tmp_path,
            [ValidationSchedule(every_n_steps=2)],
            val_check_interval=10,
            check_val_every_n_epoch=None,
        )


def test_steps_a_fit_never_reaches_are_named(module_kwargs, data_kwargs, tmp_path):
    """2 epochs of 3 steps end at step 6: max_steps 7, a listed validation at 9, the teacher stage's
    end at 6 (no joint step follows it) and a warm-up ending at 8 are each named."""
    schedule = ValidationSchedule(at_steps=[2, 9])
    kwargs = {
        **module_kwargs,
        "stages": [{"steps": 6, "train": "estimator", "re_learns_from": "teacher"}, {}],
        "optimizer": OptimizerSpec(warmup_steps=2),
    }
    with pytest.warns(UserWarning) as warned:
        fit_by_steps(kwargs, data_kwargs, tmp_path, [schedule], max_epochs=2)
    messages = [str(w.message) for w in warned]
    assert "this fit ends at optimizer step 6 and never reaches validation.at_steps 9" in messages
    assert "this fit ends at optimizer step 6 and never reaches trainer.max_steps 7" in messages
    assert "this fit ends at optimizer step 6: no step follows model.stages[0] 6" in messages
    assert "this fit ends at optimizer step 6 and never reaches the end of model.optimizer.warmup_steps 8" in messages


def test_a_tie_keeps_the_later_step(module_kwargs, data_kwargs, tmp_path):
    """BM25's own Recall@1 does not move with training: every validation ties. Lightning's
    ModelCheckpoint keeps the first of equal scores; `LaterOnTiesCheckpoint` the last."""
    kept = {}
    for name, kind in (("lightning", ModelCheckpoint), ("later", LaterOnTiesCheckpoint)):
        best = kind(dirpath=tmp_path / name, filename="best", monitor="val/retriever_recall@1", mode="max")
        fit_by_steps(module_kwargs, data_kwargs, tmp_path, [ValidationSchedule(every_n_steps=2), best])
        kept[name] = torch.load(best.best_model_path, weights_only=False)["global_step"]
    assert kept == {"lightning": 2, "later": 7}


def test_a_resume_mid_epoch_validates_and_trains_as_the_uninterrupted_run(module_kwargs, data_kwargs, tmp_path):
    """Step 4's checkpoint lies 5 batches into the second epoch; the resumed fit validates at 6 and 7
    (not again at 4) and ends with the uninterrupted run's weights and dev metrics."""
    runs = {}
    for name, resume in (("full", None), ("resumed", str(tmp_path / "ckpt" / "step=4.ckpt"))):
        seen = Validations()
        every = ModelCheckpoint(dirpath=tmp_path / "ckpt", filename="{step}", save_top_k=-1)
        callbacks = [ValidationSchedule(every_n_steps=2), seen] + ([every] if resume is None else [])
        trainer = fit_by_steps(module_kwargs, data_kwargs, tmp_path / name, callbacks, ckpt_path=resume)
        runs[name] = (seen.steps, trainer.lightning_module.state_dict(), trainer.callback_metrics)
    (full_steps, full_weights, full_metrics), (steps, weights, metrics) = runs["full"], runs["resumed"]
    assert full_steps == [2, 4, 6, 7] and steps == [6, 7]
    for key, value in full_weights.items():
        assert torch.allclose(weights[key], value, atol=1e-6), key
    assert {k: float(v) for k, v in metrics.items()} == pytest.approx({k: float(v) for k, v in full_metrics.items()})
