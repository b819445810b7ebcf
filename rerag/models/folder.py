"""The exported folder of a RE-RAG model: a Hugging Face model (safetensors), its tokenizer and a
small JSON of the settings the model needs to read its input (template, lengths, label words)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from peft import PeftModel
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from erag.lm import load_tokenizer, resolve
from rerag.models.lora import load_model_folder


def save_folder(
    directory: str | Path,
    model,
    tokenizer: PreTrainedTokenizerBase,
    settings_file: str,
    settings: dict[str, Any],
    adapter: str | None = None,
) -> None:
    """Write the model (safetensors, or only its LoRA adapter when it has one: `adapter` of a
    model with several), the tokenizer and `settings_file`."""
    directory = Path(directory)
    if isinstance(model, PeftModel) and adapter is not None:
        model.save_pretrained(directory, safe_serialization=True, selected_adapters=[adapter])
        nested = directory / adapter  # PEFT writes a named adapter one folder down
        if nested.is_dir():
            for f in nested.iterdir():
                f.replace(directory / f.name)
            shutil.rmtree(nested)
    else:
        model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    (directory / settings_file).write_text(json.dumps(settings, indent=2))


def load_folder(
    directory: str | Path, settings_file: str, trust_remote_code: bool = False
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]:
    """Read what `save_folder` wrote; no Lightning needed and no code run from files. A settings
    file may name the tokenizer (`"tokenizer": "rerag:assets/demo_tokenizer"`) when the folder
    holds none of its own, as the shipped RE does."""
    directory = resolve(str(directory))
    path = Path(directory) / settings_file
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found: {directory} is not a folder written by `rerag export`")
    settings = json.loads(path.read_text())
    model = load_model_folder(directory, trust_remote_code).eval()
    tokenizer = load_tokenizer(settings.pop("tokenizer", directory), trust_remote_code)
    return model, tokenizer, settings
