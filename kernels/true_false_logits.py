"""Triton: log p_true, log p_false from logits [N, V], forward and backward.

Eager PyTorch builds a float32 [N, V] softmax in the forward and again in the backward. Here the
forward streams each row once with an online logsumexp and saves only lse [N]; the backward
streams the logits once more and writes grad_logits directly (RE-RAG eq. 3-4 and eq. 11;
docs/kernels.md):
    d/dz_k (a log p_t + b log p_f) = a [k == t] + b [k == f] - (a + b) softmax_k
Both kernels take the logits times `scale`, so that the fused LM head (kernels/fused_lm_head.py)
runs them on vocabulary slices of unscaled logits.
"""

import torch
import triton
import triton.language as tl

# Launch settings: BLOCK columns per program step and num_warps, the fastest of a sweep of both
# on an H200 (`kernel.py --sweep` among the benchmark scripts).
LSE_LAUNCH = dict(BLOCK=8192, num_warps=4)
GRAD_LAUNCH = dict(BLOCK=4096, num_warps=8)


@triton.jit
def _lse_kernel(
    z_ptr, stride, lse_ptr, log_pt_ptr, log_pf_ptr, V, true_id, false_id, scale,
    PICK: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """lse[row] = logsumexp(scale * z[row, :]), one program per row; with PICK also log p_t, log p_f."""
    row = tl.program_id(0).to(tl.int64)
    z_row = z_ptr + row * stride
    acc_ty = lse_ptr.dtype.element_ty  # float32 (float64 for float64 logits)
    m = tl.full((), float("-inf"), acc_ty)  # running max
    s = tl.full((), 0.0, acc_ty)  # running sum of exp(z - m)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(z_row + cols, mask=cols < V, other=float("-inf")).to(acc_ty) * scale
        m_new = tl.maximum(m, tl.max(z, axis=0))
        # While every logit so far is -inf, shift by 0 instead of m_new to avoid inf - inf = nan.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(z - shift), axis=0)
        m = m_new
    lse = m + tl.log(s)
    tl.store(lse_ptr + row, lse)
    if PICK:  # here rather than as four small PyTorch ops: the op is launch-bound at small N
        tl.store(log_pt_ptr + row, tl.load(z_row + true_id).to(acc_ty) * scale - lse)
        tl.store(log_pf_ptr + row, tl.load(z_row + false_id).to(acc_ty) * scale - lse)


@triton.jit
def _grad_kernel(
    z_ptr, z_stride, grad_ptr, grad_stride, lse_ptr, g_pt_ptr, g_pf_ptr, V, true_id, false_id, scale,
    BLOCK: tl.constexpr,
):  # fmt: skip
    """grad[row, k] = scale * (a [k == t] + b [k == f] - (a + b) exp(scale * z[row, k] - lse[row]))."""
    # No reduction, so one program per (row, block of columns).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < V
    acc_ty = lse_ptr.dtype.element_ty
    z = tl.load(z_ptr + row * z_stride + cols, mask=mask, other=float("-inf")).to(acc_ty) * scale
    g_pt = tl.load(g_pt_ptr + row)
    g_pf = tl.load(g_pf_ptr + row)
    grad = -(g_pt + g_pf) * tl.exp(z - tl.load(lse_ptr + row))
    grad += tl.where(cols == true_id, g_pt, 0.0) + tl.where(cols == false_id, g_pf, 0.0)
    tl.store(grad_ptr + row * grad_stride + cols, (grad * scale).to(grad_ptr.dtype.element_ty), mask=mask)


def logsumexp_rows(z: torch.Tensor, scale=1.0, ids: tuple[int, int] | None = None, launch: dict | None = None):
    """lse = logsumexp(scale * z, dim=1) for z [N, V] with unit column stride: float32 [N] (float64 for float64).

    With ids = (true_id, false_id), returns (lse, log p_t, log p_f) instead.
    """
    N, V = z.shape
    new = lambda: torch.empty(N, device=z.device, dtype=torch.promote_types(z.dtype, torch.float32))
    lse = new()
    log_pt, log_pf = (new(), new()) if ids else (lse, lse)  # unused pointers without ids
    true_id, false_id = ids or (0, 0)
    _lse_kernel[(N,)](
        z, z.stride(0), lse, log_pt, log_pf, V, true_id, false_id, scale, PICK=ids is not None,
        **(launch or LSE_LAUNCH),
    )  # fmt: skip
    return (lse, log_pt, log_pf) if ids else lse


def softmax_grad(
    z, lse, g_pt, g_pf, true_id, false_id, scale=1.0, out_dtype=None, launch: dict | None = None
) -> torch.Tensor:
    """dL/dz for L = sum of g_pt log p_t + g_pf log p_f, with log p = log_softmax(scale * z) under lse [N].

    true_id and false_id may fall outside [0, V) (a vocabulary slice without them): then no
    one-hot term. Returns [N, V] in out_dtype (default z's dtype).
    """
    launch = launch or GRAD_LAUNCH
    N, V = z.shape
    grad = torch.empty(N, V, device=z.device, dtype=out_dtype or z.dtype)
    g_pt, g_pf = g_pt.to(lse.dtype).contiguous(), g_pf.to(lse.dtype).contiguous()
    grid = (N, triton.cdiv(V, launch["BLOCK"]))
    _grad_kernel[grid](z, z.stride(0), grad, grad.stride(0), lse, g_pt, g_pf, V, true_id, false_id, scale, **launch)
    return grad


class _TrueFalseLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, true_id, false_id, lse_launch, grad_launch):
        logits = logits if logits.stride(-1) == 1 else logits.contiguous()
        lse, log_pt, log_pf = logsumexp_rows(logits, ids=(true_id, false_id), launch=lse_launch)
        ctx.save_for_backward(logits, lse)
        ctx.ids, ctx.grad_launch = (true_id, false_id), grad_launch
        return log_pt, log_pf

    @staticmethod
    def backward(ctx, g_pt, g_pf):
        logits, lse = ctx.saved_tensors
        # Unused outputs get zero gradients (autograd materializes them); expanded ones are strided.
        grad = softmax_grad(logits, lse, g_pt, g_pf, *ctx.ids, launch=ctx.grad_launch)
        return grad, None, None, None, None


def triton_true_false_logprobs(
    logits: torch.Tensor,
    true_id: int,
    false_id: int,
    lse_launch: dict | None = None,
    grad_launch: dict | None = None,
):
    """log p_true, log p_false (float32 [N]; float64 for float64 logits) from logits [N, V].

    lse_launch / grad_launch override LSE_LAUNCH / GRAD_LAUNCH (the benchmark's sweep, the tests).
    """
    return _TrueFalseLogprobs.apply(logits, true_id, false_id, lse_launch, grad_launch)
