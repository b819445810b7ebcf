import json

import lightning as L

from rerag.callbacks import LearningCurve
from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule


def fit_with_curve(module_kwargs, data_kwargs, tmp_path, sanity_steps: int) -> LearningCurve:
    L.seed_everything(0)
    curve = LearningCurve(str(tmp_path / "curve"))
    L.Trainer(accelerator="cpu", max_steps=4, val_check_interval=2, num_sanity_val_steps=sanity_steps, logger=False,
              enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
              callbacks=[curve], default_root_dir=tmp_path,
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
