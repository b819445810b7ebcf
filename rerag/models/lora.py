"""LoRA adapters (PEFT) for the RE and the generator: train low-rank updates W + (alpha/r) B A
of chosen weight matrices and freeze everything else.

`RERAGModule(estimator_lora=LoraSpec(...), generator_lora=...)` wraps either model; None keeps
full fine-tuning. `rerag export` merges the adapters into the weights by default and writes
the adapters alone with `--adapters-only`; `load_seq2seq` reads either kind of folder.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from transformers import AutoModelForSeq2SeqLM, PreTrainedModel

ADAPTER_CONFIG = "adapter_config.json"


@dataclass
class LoraSpec:
    """PEFT LoRA settings for one model.

    `target_modules` names the linear layers that get adapters (T5: `q`, `k`, `v`, `o`, `wi`,
    `wo`); None takes PEFT's default for the architecture (T5: `q`, `v`)."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    target_modules: list[str] | None = None


# Lightning checkpoints keep hyperparameters; let `torch.load(weights_only=True)` rebuild these.
torch.serialization.add_safe_globals([LoraSpec])


def add_lora(model: PreTrainedModel, spec: LoraSpec | None) -> PreTrainedModel | PeftModel:
    """Wrap `model` with LoRA adapters (base weights frozen), or return it as is for None."""
    if spec is None:
        return model
    config = LoraConfig(r=spec.r, lora_alpha=spec.alpha, lora_dropout=spec.dropout,
                        target_modules=spec.target_modules, task_type=TaskType.SEQ_2_SEQ_LM)
    return get_peft_model(model, config)


def merge_lora(model: PreTrainedModel | PeftModel) -> PreTrainedModel:
    """Fold the adapters into the base weights (in place) and return the plain model."""
    return model.merge_and_unload() if isinstance(model, PeftModel) else model


def load_seq2seq(directory: str | Path, trust_remote_code: bool = False) -> PreTrainedModel:
    """Load a seq2seq folder written by `save_pretrained`: full safetensors weights, or LoRA
    adapters over the base model their `adapter_config.json` names (then merged, for inference)."""
    directory = Path(directory)
    if not (directory / ADAPTER_CONFIG).is_file():
        return AutoModelForSeq2SeqLM.from_pretrained(directory, use_safetensors=True,
                                                     trust_remote_code=trust_remote_code)
    base = json.loads((directory / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{directory / ADAPTER_CONFIG}: names no base model (base_model_name_or_path)")
    model = AutoModelForSeq2SeqLM.from_pretrained(base, trust_remote_code=trust_remote_code)
    return PeftModel.from_pretrained(model, directory).merge_and_unload()
