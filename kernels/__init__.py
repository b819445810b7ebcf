"""Normalized true/false log-probabilities for the RE-RAG relevance estimator.

log p_t = z_t - logsumexp(z) and log p_f = z_f - logsumexp(z) over the whole vocabulary, with
gradients: the inputs of the normalized RE (RE-RAG eq. 3-4) and of the token loss (eq. 11).
See docs/kernels.md and docs/method.md.

Backends: "triton" (CUDA, or CPU under TRITON_INTERPRET=1) and "reference" (eager PyTorch).
None picks $RERAG_KERNELS_BACKEND if set, else Triton for CUDA tensors and the reference otherwise.
"""

import os

import torch

from kernels import reference

try:  # Triton is optional: CPU-only installs run the reference
    import triton  # noqa: F401
except ImportError:
    HAS_TRITON = False
else:
    HAS_TRITON = True
    from kernels.fused_lm_head import triton_fused_true_false_logprobs
    from kernels.true_false_logits import triton_true_false_logprobs

__all__ = ["true_false_logprobs", "fused_true_false_logprobs", "HAS_TRITON"]


def _pick_backend(backend: str | None, x: torch.Tensor) -> str:
    backend = backend or os.environ.get("RERAG_KERNELS_BACKEND") or None
    if backend is None:
        return "triton" if HAS_TRITON and x.is_cuda else "reference"
    if backend not in ("triton", "reference"):
        raise ValueError(f"backend must be 'triton', 'reference' or None, got {backend!r}")
    if backend == "triton":
        if not HAS_TRITON:
            raise ImportError("backend='triton' needs the triton package (pip install rerag[triton])")
        if not x.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError("backend='triton' needs CUDA tensors, or TRITON_INTERPRET=1 for CPU ones")
    return backend


def _check_ids(true_id: int, false_id: int, vocab_size: int) -> None:
    for name, i in (("true_id", true_id), ("false_id", false_id)):
        if not 0 <= i < vocab_size:
            raise IndexError(f"{name}={i} outside the vocabulary of size {vocab_size}")


def true_false_logprobs(logits: torch.Tensor, true_id: int, false_id: int, *, backend: str | None = None):
    """(log p_true, log p_false) from logits [..., V]: float32 [...] (float64 for float64), differentiable.

    The Triton path reads the logits once in the forward (online logsumexp, saves lse [N]) and
    once in the backward (writes grad_logits in the logits' dtype, no stored softmax).
    """
    lead, vocab_size = logits.shape[:-1], logits.shape[-1]
    _check_ids(true_id, false_id, vocab_size)
    z = logits.reshape(-1, vocab_size)
    if _pick_backend(backend, z) == "triton":
        log_pt, log_pf = triton_true_false_logprobs(z, true_id, false_id)
    else:
        log_pt, log_pf = reference.true_false_logprobs(z, true_id, false_id)
    return log_pt.reshape(lead), log_pf.reshape(lead)


def fused_true_false_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    true_id: int,
    false_id: int,
    scale: float = 1.0,
    *,
    backend: str | None = None,
):
    """(log p_true, log p_false) with logits = (scale * hidden) @ weight.T, never built whole.

    hidden [..., d] decoder states, weight [V, d] the LM head; outputs float32 [...] (float64 for
    float64). Gradients flow to hidden and weight; under autocast both are cast to the autocast
    dtype first. `scale` is T5's tied-embedding rescale d_model**-0.5 (1.0 otherwise).
    """
    lead, d = hidden.shape[:-1], hidden.shape[-1]
    _check_ids(true_id, false_id, weight.shape[0])
    h = hidden.reshape(-1, d)
    device_type = h.device.type
    if torch.is_autocast_enabled(device_type):  # as F.linear would: the LM head runs in the autocast dtype
        dtype = torch.get_autocast_dtype(device_type)
        h, weight = h.to(dtype), weight.to(dtype)
    with torch.autocast(device_type, enabled=False):  # the float32 maths inside stays float32
        if _pick_backend(backend, h) == "triton":
            log_pt, log_pf = triton_fused_true_false_logprobs(h, weight, true_id, false_id, scale)
        else:
            log_pt, log_pf = reference.fused_true_false_logprobs(h, weight, true_id, false_id, scale)
    return log_pt.reshape(lead), log_pf.reshape(lead)
