"""`torch.compile` for the RE and the generator, where it takes effect.

`nn.Module.compile()` on the Hugging Face model would compile only its `forward`, and the RE never
calls that: it calls the encoder and decoder stacks itself (`first_step_hidden`), as the causal
generator's `answer_loglik` does. So the stacks are compiled instead: every path that reads the
models (training, scoring, `generate`, readers) goes through them, and they hold nearly all the
FLOPs. What runs around them stays eager on purpose: PEFT adapter switches, the Triton kernels of
`kernels`, and the Python bookkeeping of batching, none of which dynamo should trace.

Compilation is in place (`nn.Module.compile`), so parameter names, `state_dict`, checkpoints and
exports are unchanged, and lazy: nothing compiles until the first call, on whatever device the
model is then.

Every Hugging Face stack runs the same decorated `forward` code object, and dynamo's recompile
limit (8 by default) counts that object's graphs together: encoder and decoder of both models, each
call signature, grad mode on and off, `generate`'s cache states. Training steps, scoring and
`generate` of a tiny T5 RE and generator, over varying input lengths, make more graphs than that; at
the default limit the rest would run eagerly, with only a warning. Compiling therefore raises the limit to `RECOMPILE_LIMIT`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch
from torch import nn

#: `model.assembly.compile` / `--compile`: false or null = eager, true = torch.compile's defaults, a dict =
#: torch.compile's keyword arguments (e.g. {mode: max-autotune, dynamic: true, backend: inductor}).
CompileSetting = bool | dict[str, Any] | None

Owner = TypeVar("Owner", bound=nn.Module)

#: The floor `compile_stacks` sets on torch._dynamo.config.recompile_limit (see above).
RECOMPILE_LIMIT = 64


def compile_options(setting: CompileSetting) -> dict[str, Any] | None:
    """The torch.compile keyword arguments a setting asks for; None: stay eager."""
    if setting is None or setting is False:
        return None
    if setting is True:
        return {}
    if isinstance(setting, dict):
        return dict(setting)
    raise TypeError(f"compile must be a bool, null or a dict of torch.compile arguments, got {setting!r}")


def backbone_stacks(model: nn.Module) -> list[nn.Module]:
    """The modules the RE and generator call on their hot path: an encoder-decoder's encoder and
    decoder stacks, a decoder-only model's decoder (its body without the LM head)."""
    stacks = [model.get_encoder()] if model.config.is_encoder_decoder else []
    return stacks + [model.get_decoder()]


def compile_stacks(owner: Owner, setting: CompileSetting = True) -> Owner:
    """Compile the backbone stacks of `owner.model` (a `RelevanceEstimator` or a `Generator`) in
    place with `setting` (`compile_options`) and return `owner`; a no-op when `setting` is falsy."""
    options = compile_options(setting)
    if options is not None:
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
        for stack in backbone_stacks(owner.model):
            stack.compile(**options)
    return owner
