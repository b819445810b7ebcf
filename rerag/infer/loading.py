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


def exported_generator(name_or_path: str | None, trust_remote_code: bool = False) -> Generator | None:
    """The generator folder `name_or_path` (one `rerag export` wrote, or the shipped
    `rerag:assets/reader`) as a `Generator` that reads with its own template; None for any other
    name (a Hugging Face LM, read with `erag.lm.load_lm` and its reader prompts)."""
    from erag.lm import resolve
    from rerag.models.generator import CONFIG_FILE

    if name_or_path is None or not (Path(resolve(name_or_path)) / CONFIG_FILE).is_file():
        return None
    return Generator.from_pretrained(name_or_path, trust_remote_code)


def models_for_evaluation(
    checkpoint: str | None, estimator: str | None, llm: str | None
) -> tuple[RelevanceEstimator | None, Generator | None, str | None]:
    """What `rerag eor` and `rerag erag` read and rerank with: (RE, generator, Hugging Face LM name).
    A checkpoint gives both models; `estimator` (an exported RE folder) replaces or supplies the RE;
    `llm` an exported generator folder (then the generator) or any Hugging Face LM. One reader is needed."""
    re_model, generator = load_checkpoint(checkpoint) if checkpoint else (None, None)
    if estimator:
        re_model = load_estimator(estimator, "cpu")
    exported = exported_generator(llm)
    if exported is not None:
        generator, llm = exported, None
    if generator is None and llm is None:
        raise ValueError("no reader: give --llm (any Hugging Face LM, or an exported generator folder) or --checkpoint")
    return re_model, generator, llm
