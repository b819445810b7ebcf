"""Eager PyTorch reference for the normalized true/false log-probabilities.

The RE-RAG relevance estimator (RE) reads the first decoder step's logits z in R^V and needs
log p_t = z_t - logsumexp(z) and log p_f = z_f - logsumexp(z): their difference is the log-odds
of the normalized RE (paper eq. 3-4) and 1 - p_t - p_f is the token loss (eq. 11); see
docs/method.md. These functions are the CPU path and the oracle the Triton kernels
are tested against.
"""

import torch


def _acc_dtype(x: torch.Tensor) -> torch.dtype:
    """float32 maths for fp32/bf16/fp16 inputs (this is the oracle), float64 for gradcheck."""
    return torch.promote_types(x.dtype, torch.float32)


def true_false_logprobs(logits: torch.Tensor, true_id: int, false_id: int):
    """log p_true, log p_false (float32 [N]; float64 for float64) from logits [N, V]."""
    z = logits.to(_acc_dtype(logits))
    lse = torch.logsumexp(z, dim=-1)
    return z[:, true_id] - lse, z[:, false_id] - lse


class _ChunkedFusedTrueFalse(torch.autograd.Function):
    """From hidden states and the LM-head weight, a vocabulary chunk at a time.

    Autograd over a chunked loop would still keep every chunk's logits for the backward, i.e.
    all of [N, V]; this Function saves only the inputs and lse [N] and recomputes each chunk.
    """

    @staticmethod
    def forward(ctx, hidden, weight, true_id, false_id, scale, chunk_size):
        h = hidden.to(_acc_dtype(hidden)) * scale
        lse = torch.full((h.shape[0],), float("-inf"), device=h.device, dtype=h.dtype)
        for start in range(0, weight.shape[0], chunk_size):
            z = h @ weight[start : start + chunk_size].to(h.dtype).T
            lse = torch.logaddexp(lse, torch.logsumexp(z, dim=-1))
        z_tf = h @ weight[[true_id, false_id]].to(h.dtype).T
        ctx.save_for_backward(hidden, weight, lse)
        ctx.ids, ctx.scale, ctx.chunk_size = (true_id, false_id), scale, chunk_size
        return z_tf[:, 0] - lse, z_tf[:, 1] - lse

    @staticmethod
    def backward(ctx, g_true, g_false):
        hidden, weight, lse = ctx.saved_tensors
        true_id, false_id = ctx.ids
        h = hidden.to(lse.dtype) * ctx.scale
        # d/dz_k (a log p_t + b log p_f) = a[k==t] + b[k==f] - (a+b) softmax_k: dense part here,
        # the two one-hot columns below.
        g_sum = (g_true + g_false).to(h.dtype)
        grad_h = torch.zeros_like(h)
        grad_w = weight.new_zeros(weight.shape, dtype=h.dtype) if ctx.needs_input_grad[1] else None
        for start in range(0, weight.shape[0], ctx.chunk_size):
            w = weight[start : start + ctx.chunk_size].to(h.dtype)
            g = -g_sum[:, None] * torch.exp(h @ w.T - lse[:, None])
            grad_h += g @ w
            if grad_w is not None:
                grad_w[start : start + ctx.chunk_size] = g.T @ h
        g_tf = torch.stack([g_true, g_false], dim=1).to(h.dtype)  # [N, 2]
        w_tf = weight[[true_id, false_id]].to(h.dtype)  # [2, d]
        grad_h += g_tf @ w_tf
        grad_hidden = (grad_h * ctx.scale).to(hidden.dtype) if ctx.needs_input_grad[0] else None
        if grad_w is not None:
            grad_w.index_add_(0, torch.tensor([true_id, false_id], device=weight.device), g_tf.T @ h)
            grad_w = grad_w.to(weight.dtype)
        return grad_hidden, grad_w, None, None, None, None


def fused_true_false_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    true_id: int,
    false_id: int,
    scale: float = 1.0,
    chunk_size: int = 4096,
):
    """log p_true, log p_false (float32 [N]; float64 for float64), logits = scale * hidden @ weight.T.

    hidden [N, d], weight [V, d]; memory is O(N * chunk_size), never O(N * V).
    """
    return _ChunkedFusedTrueFalse.apply(hidden, weight, true_id, false_id, float(scale), chunk_size)
