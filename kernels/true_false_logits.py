"""Triton: log p_true, log p_false from logits [N, V], forward and backward.

Eager PyTorch builds a float32 [N, V] softmax in the forward and again in the backward. Here the
forward streams each row once with an online logsumexp and saves only lse [N]; the backward
streams the logits once more and writes grad_logits directly (RE-RAG eq. 3-4 and eq. 11;
docs/kernels.md):
    d/dz_k (a log p_t + b log p_f) = a [k == t] + b [k == f] - (a + b) softmax_k
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _forward_kernel(z_ptr, stride, lse_ptr, log_pt_ptr, log_pf_ptr, V, true_id, false_id, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    z_row = z_ptr + row * stride
    acc_ty = lse_ptr.dtype.element_ty  # float32 (float64 for float64 logits)
    m = tl.full((), float("-inf"), acc_ty)  # running max
    s = tl.full((), 0.0, acc_ty)  # running sum of exp(z - m)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(z_row + cols, mask=cols < V, other=float("-inf")).to(acc_ty)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        # While every logit so far is -inf, shift by 0 instead of m_new to avoid inf - inf = nan.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(z - shift), axis=0)
        m = m_new
    lse = m + tl.log(s)
    tl.store(lse_ptr + row, lse)
    tl.store(log_pt_ptr + row, tl.load(z_row + true_id).to(acc_ty) - lse)
    tl.store(log_pf_ptr + row, tl.load(z_row + false_id).to(acc_ty) - lse)


@triton.jit
def _backward_kernel(
    z_ptr, z_stride, grad_ptr, grad_stride, lse_ptr, g_pt_ptr, g_pf_ptr, V, true_id, false_id, BLOCK: tl.constexpr
):
    # No reduction in the backward, so one program per (row, block of columns).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < V
    z = tl.load(z_ptr + row * z_stride + cols, mask=mask, other=float("-inf")).to(lse_ptr.dtype.element_ty)
    g_pt = tl.load(g_pt_ptr + row)
    g_pf = tl.load(g_pf_ptr + row)
    grad = -(g_pt + g_pf) * tl.exp(z - tl.load(lse_ptr + row))
    grad += tl.where(cols == true_id, g_pt, 0.0) + tl.where(cols == false_id, g_pf, 0.0)
    tl.store(grad_ptr + row * grad_stride + cols, grad.to(grad_ptr.dtype.element_ty), mask=mask)


class _TrueFalseLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, true_id, false_id, block):
        logits = logits if logits.stride(-1) == 1 else logits.contiguous()
        N, V = logits.shape
        acc = torch.promote_types(logits.dtype, torch.float32)  # float32, or float64 for gradcheck
        lse, log_pt, log_pf = (torch.empty(N, device=logits.device, dtype=acc) for _ in range(3))
        _forward_kernel[(N,)](logits, logits.stride(0), lse, log_pt, log_pf, V, true_id, false_id, BLOCK=block)
        ctx.save_for_backward(logits, lse)
        ctx.ids, ctx.block = (true_id, false_id), block
        return log_pt, log_pf

    @staticmethod
    def backward(ctx, g_pt, g_pf):
        logits, lse = ctx.saved_tensors
        N, V = logits.shape
        # Unused outputs get zero gradients (autograd materializes them); expanded ones are strided.
        g_pt, g_pf = g_pt.to(lse.dtype).contiguous(), g_pf.to(lse.dtype).contiguous()
        grad = torch.empty_like(logits)
        grid = (N, triton.cdiv(V, ctx.block))
        _backward_kernel[grid](
            logits, logits.stride(0), grad, grad.stride(0), lse, g_pt, g_pf, V, *ctx.ids, BLOCK=ctx.block
        )
        return grad, None, None, None


def triton_true_false_logprobs(logits: torch.Tensor, true_id: int, false_id: int, block: int = 4096):
    """log p_true, log p_false (float32 [N]; float64 for float64 logits) from logits [N, V]."""
    return _TrueFalseLogprobs.apply(logits, true_id, false_id, block)
