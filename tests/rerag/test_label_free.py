"""The embedded default is the paper's method: no relevance label of the world reaches a loss."""

from pathlib import Path

import lightning as L
import pytest
import yaml

from rerag.data.datamodule import RERAGDataModule
from rerag.losses import LossSpec
from rerag.module import RERAGModule
from rerag.reproduce.workspace import DEMO_CONFIG, SCALES
from rerag.stages import Stage

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def training_losses(module_kwargs, data_kwargs, loss: LossSpec, stages: list[Stage]) -> tuple[float, float]:
    """The first training step's loss on a batch, and on the same batch with every has_answer and
    gold label flipped: equal exactly when no label reaches a loss."""
    L.seed_everything(0)
    module = RERAGModule(**{**module_kwargs, "loss": loss, "stages": stages})
    data = RERAGDataModule(**data_kwargs)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    assert 0 < batch["has_answer"].sum() < batch["has_answer"].numel()  # both labels present: a flip changes them
    flipped = {**batch, **{name: ~batch[name] for name in ("has_answer", "gold") if name in batch}}
    return tuple(module.training_step(b, 0).item() for b in (batch, flipped))


@pytest.mark.parametrize("config", ["demo.yaml", "quickstart.yaml"])
def test_the_embedded_default_puts_no_label_into_any_loss(config, module_kwargs, data_kwargs):
    model = yaml.safe_load((CONFIGS / config).read_text())["model"]
    loss, stages = LossSpec(**model["loss"]), [Stage(**s) for s in model["stages"] or [{}]]
    assert loss.alpha_anchor == 0 and all(stage.re_learns_from != "labels" for stage in stages)
    plain, flipped = training_losses(module_kwargs, data_kwargs, loss, stages)
    assert plain == flipped
    # the check can fail: the anchored overlay's loss reads the labels
    anchored = yaml.safe_load((CONFIGS / "demo_anchor.yaml").read_text())["model"]["loss"]
    plain, flipped = training_losses(module_kwargs, data_kwargs, LossSpec(**{**model["loss"], **anchored}), stages)
    assert plain != flipped


def test_the_reproductions_main_model_is_the_label_free_demo():
    """`rerag reproduce`'s main model trains the demo config; no scale overrides its loss or stages."""
    assert DEMO_CONFIG == (CONFIGS / "demo.yaml").resolve()
    for scale in SCALES.values():
        assert not [key for key in scale.overrides if key.startswith(("model.loss", "model.stages"))]
