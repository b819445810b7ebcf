"""LoRA adapters (PEFT) for the RE and the generator: train low-rank updates W + (alpha/r) B A
of chosen weight matrices and freeze everything else.

`RERAGModule(estimator_lora=LoraSpec(...), generator_lora=...)` wraps either model; None keeps
full fine-tuning. With `shared_base`, the RE and the generator are two named adapters ("re",
"generator") of one frozen base model: one copy of the base weights in memory. `rerag export`
merges a model's adapter into its weights by default and writes the adapter alone with
`--adapters_only`; `load_model_folder` reads either kind of folder.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from transformers import PreTrainedModel

from erag.lm import BASE_ADAPTER, load_pretrained

ADAPTER_CONFIG = "adapter_config.json"


@dataclass
class LoraSpec:
    """PEFT LoRA settings for one model.

    `target_modules` names the linear layers that get adapters (T5: `q`, `k`, `v`, `o`, `wi`,
    `wo`; Llama: `q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`, `down_proj`);
    None takes PEFT's default for the architecture (T5: `q`, `v`; Llama: `q_proj`, `v_proj`).
    `layers_to_transform` limits the adapters to those layer indices (None: every layer): adapting
    only the top layers of a frozen base also spares the backward pass through the layers below."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    target_modules: list[str] | None = None
    layers_to_transform: list[int] | None = None


# Lightning checkpoints keep hyperparameters; let `torch.load(weights_only=True)` rebuild these.
torch.serialization.add_safe_globals([LoraSpec])


def lora_config(model: PreTrainedModel, spec: LoraSpec) -> LoraConfig:
    task = TaskType.SEQ_2_SEQ_LM if model.config.is_encoder_decoder else TaskType.CAUSAL_LM
    return LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=spec.target_modules,
        layers_to_transform=spec.layers_to_transform,
        task_type=task,
    )


def add_lora(model: PreTrainedModel, spec: LoraSpec | None) -> PreTrainedModel | PeftModel:
    """Wrap `model` with LoRA adapters (base weights frozen), or return it as is for None."""
    return model if spec is None else get_peft_model(model, lora_config(model, spec))


def add_adapters(model: PreTrainedModel, specs: dict[str, LoraSpec]) -> PeftModel:
    """One frozen base with a named LoRA adapter per entry of `specs` (e.g. "re", "generator"),
    each trainable; run one with `erag.lm.adapter_scope(model, name)`."""
    (first, spec), *rest = specs.items()
    peft_model = get_peft_model(model, lora_config(model, spec), adapter_name=first)
    for name, spec in rest:
        config = lora_config(model, spec)
        config.base_model_name_or_path = peft_model.peft_config[first].base_model_name_or_path  # as the first has
        peft_model.add_adapter(name, config)
    for p_name, p in peft_model.named_parameters():  # add_adapter leaves a new adapter frozen until it is set
        if any(f".{name}." in p_name for name in specs):
            p.requires_grad_(True)
    return peft_model


def merged(model: PreTrainedModel | PeftModel, adapter: str | None = None, shared: bool = False) -> PreTrainedModel:
    """The plain model with `adapter` folded into the base weights (None: the active adapter;
    `BASE_ADAPTER`: the base alone). A model `shared` with another part is copied first, so the
    other part keeps its weights; otherwise the merge is in place."""
    if not isinstance(model, PeftModel):
        return model
    if shared:
        model = copy.deepcopy(model)
    if adapter == BASE_ADAPTER:
        return model.unload()
    return model.merge_and_unload(adapter_names=None if adapter is None else [adapter])


def load_model_folder(directory: str | Path, trust_remote_code: bool = False) -> PreTrainedModel:
    """Load a folder written by `save_pretrained`: full safetensors weights, or a LoRA adapter over
    the base model its `adapter_config.json` names (then merged, for inference)."""
    directory = Path(directory)
    if not (directory / ADAPTER_CONFIG).is_file():
        return load_pretrained(str(directory), trust_remote_code, use_safetensors=True)
    base = json.loads((directory / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{directory / ADAPTER_CONFIG}: names no base model (base_model_name_or_path)")
    model = load_pretrained(base, trust_remote_code)
    return PeftModel.from_pretrained(model, directory).merge_and_unload()
