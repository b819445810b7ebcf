"""Build Hugging Face models and tokenizers from a checkpoint name, a path or a config.

A name or path of the form `package:relative/path` points inside an installed Python package
(for example `rerag:assets/demo_tokenizer`, resolved by `erag.lm.resolve`), so configs work from
any working directory; a path to a `.gguf` file loads that file (dequantized). Encoder-decoder and decoder-only models are both built: the config's
`is_encoder_decoder` picks `AutoModelForSeq2SeqLM` or `AutoModelForCausalLM`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import (
    AutoConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from erag.lm import auto_model_class, checkpoint_location, load_pretrained


@dataclass
class ModelSpec:
    """Where a model comes from: a checkpoint (`name_or_path`) or a config for random init.

    `config` holds `AutoConfig.for_model` arguments, e.g. `{model_type: t5, d_model: 64}`;
    vocabulary size and special-token ids are filled from the tokenizer. `name_or_path` may be a
    GGUF file (dequantized on load, `erag.lm.checkpoint_location`). `dtype` is the weights' dtype
    ("bfloat16", "float32"; None: the checkpoint's own, float32 for random init).
    """

    name_or_path: str | None = None
    config: dict[str, Any] | None = field(default=None)
    trust_remote_code: bool = False
    dtype: str | None = None

    def check(self, field: str = "ModelSpec") -> None:
        """A clear error, naming `field` (e.g. "model.estimator"), for a spec no model can be built from."""
        if (self.name_or_path is None) == (self.config is None):
            raise ValueError(f"{field}: needs exactly one of name_or_path and config, got {self}")
        if self.dtype is not None and not isinstance(getattr(torch, self.dtype, None), torch.dtype):
            raise ValueError(
                f"{field}.dtype: {self.dtype!r} is not a torch dtype (e.g. bfloat16, float32; null: the checkpoint's)"
            )


# Lightning checkpoints keep hyperparameters; let `torch.load(weights_only=True)` rebuild these.
torch.serialization.add_safe_globals([ModelSpec])


def architecture(spec: ModelSpec) -> dict[str, Any]:
    """`spec`'s model as `config` arguments for a random-init copy: its own config, or its
    checkpoint's (e.g. the shipped relevance-pretrained RE's shape, to ablate the pretraining)."""
    if spec.config is not None:
        return dict(spec.config)
    path, gguf_file = checkpoint_location(spec.name_or_path)
    found = AutoConfig.from_pretrained(
        path, trust_remote_code=spec.trust_remote_code, gguf_file=gguf_file
    ).to_diff_dict()
    tokenizer_given = (
        "vocab_size",
        "pad_token_id",
        "eos_token_id",
        "decoder_start_token_id",
    )  # build_model fills these
    dropped = ("architectures", "transformers_version", "_name_or_path", "dtype", *tokenizer_given)
    return {k: v for k, v in found.items() if k not in dropped}


def build_model(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """Load `spec.name_or_path`, or build a randomly initialised model from `spec.config`, in train mode."""
    spec.check()
    dtype = getattr(torch, spec.dtype) if spec.dtype else None
    if spec.name_or_path is not None:
        model = load_pretrained(spec.name_or_path, spec.trust_remote_code, dtype=dtype)
        return model.train()  # from_pretrained returns eval mode (dropout off); this builds models to train
    kwargs = dict(spec.config)
    model_type = kwargs.pop("model_type")
    kwargs.setdefault("vocab_size", len(tokenizer))
    kwargs.setdefault("pad_token_id", tokenizer.pad_token_id)
    kwargs.setdefault("eos_token_id", tokenizer.eos_token_id)
    config = AutoConfig.for_model(model_type, **kwargs)
    if config.is_encoder_decoder and "decoder_start_token_id" not in kwargs:
        config.decoder_start_token_id = tokenizer.pad_token_id
    model = auto_model_class(config).from_config(config)
    return model if dtype is None else model.to(dtype)
