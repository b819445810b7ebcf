"""Saved models back in memory, for inference: an exported RE folder (the shipped one included),
or the RE and generator of a `rerag fit` checkpoint or of a `rerag export` folder."""

from __future__ import annotations

from pathlib import Path

import torch

from rerag.infer.export import load_checkpoint
from rerag.models.compilation import compile_stacks
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator


def default_device(device: str | None = None) -> str:
    """`device`, else cuda when available, else cpu."""
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def load_estimator(
    folder: str | Path,
    device: str | None = None,
    dtype: str = "float32",
    compile: bool = False,
    trust_remote_code: bool = False,
) -> RelevanceEstimator:
    """An RE folder written by `rerag export` (or `package:path`), on `device` in `dtype`,
    its stacks compiled with `compile`."""
    model = RelevanceEstimator.from_pretrained(folder, trust_remote_code)
    model = model.to(default_device(device), getattr(torch, dtype))
    compile_stacks(model, compile)
    return model


def load_models(
    checkpoint: str | None = None, export_dir: str | None = None, trust_remote_code: bool = False
) -> tuple[RelevanceEstimator, Generator]:
    """The RE and the generator of a `rerag fit` checkpoint or of a `rerag export` folder (exactly one)."""
    if (checkpoint is None) == (export_dir is None):
        raise ValueError("give exactly one of --checkpoint or --export_dir")
    if checkpoint:
        return load_checkpoint(checkpoint)
    return (
        RelevanceEstimator.from_pretrained(Path(export_dir) / "estimator", trust_remote_code),
        Generator.from_pretrained(Path(export_dir) / "generator", trust_remote_code),
    )
