"""Build Hugging Face models and tokenizers from a checkpoint name, a path or a config.

A name or path of the form `package:relative/path` points inside an installed Python package
(for example `rerag:assets/demo_tokenizer`, resolved by `erag.lm.resolve`), so configs work from
any working directory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from erag.lm import resolve
from transformers import AutoConfig, AutoModelForSeq2SeqLM, PreTrainedModel, PreTrainedTokenizerBase


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
