"""Triton: log p_true, log p_false straight from decoder states and the LM-head weight.

logits = scale * hidden @ weight.T is [N, V] (V = 32,128 for T5); this never builds it. The
forward computes [BLOCK_N, BLOCK_V] tiles of logits in registers and keeps one logsumexp per
(row, vocabulary block); the backward recomputes each tile, turns it into the dense part of the
gradient, -(a + b) softmax (RE-RAG eq. 3-4 and eq. 11; docs/kernels.md), and adds its
products with the weight and the hidden states into gradient buffers with atomic adds, since
every tile touches rows of both. The two one-hot columns (true, false) are added in PyTorch.
"""

import os

import torch
import triton
import triton.language as tl

# Read when the kernels are defined, as @triton.jit itself does.
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def _dot(a, b, acc, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    if UPCAST:  # Triton's interpreter multiplies bf16 bit patterns (triton-lang/triton#11584);
        a, b = a.to(tl.float32), b.to(tl.float32)  # bf16 products are exact in fp32
    return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def _logits_tile(acc, h_ptr, w_ptr, rows, cols, N, V, D, scale, PRECISION, UPCAST, BLOCK_D: tl.constexpr):
    """scale * hidden[rows] @ weight[cols].T, a [BLOCK_N, BLOCK_V] tile in the dtype of acc (zeros)."""
    for start in range(0, D, BLOCK_D):
        ks = start + tl.arange(0, BLOCK_D)
        h = tl.load(h_ptr + rows[:, None] * D + ks[None, :], mask=(rows[:, None] < N) & (ks[None, :] < D), other=0.0)
        w = tl.load(w_ptr + cols[:, None] * D + ks[None, :], mask=(cols[:, None] < V) & (ks[None, :] < D), other=0.0)
        acc = _dot(h, tl.trans(w), acc, PRECISION, UPCAST)
    return acc * scale


@triton.jit
def _forward_kernel(
    h_ptr, w_ptr, lse_part_ptr, N, V, D, scale,
    PRECISION: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    acc = tl.zeros((BLOCK_N, BLOCK_V), lse_part_ptr.dtype.element_ty)
    z = _logits_tile(acc, h_ptr, w_ptr, rows, cols, N, V, D, scale, PRECISION, UPCAST, BLOCK_D)
    z = tl.where(cols[None, :] < V, z, float("-inf"))
    m = tl.max(z, axis=1)  # finite: every block holds at least one real column
    lse = m + tl.log(tl.sum(tl.exp(z - m[:, None]), axis=1))
    tl.store(lse_part_ptr + rows * tl.num_programs(1) + tl.program_id(1), lse, mask=rows < N)


@triton.jit
def _backward_kernel(
    h_ptr, w_ptr, lse_ptr, g_sum_ptr, grad_h_ptr, grad_w_ptr, N, V, D, scale,
    PRECISION: tl.constexpr, UPCAST: tl.constexpr, GRAD_H: tl.constexpr, GRAD_W: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)
    row_ok, col_ok = rows[:, None] < N, cols[:, None] < V
    acc_ty = grad_h_ptr.dtype.element_ty
    acc = tl.zeros((BLOCK_N, BLOCK_V), acc_ty)
    z = _logits_tile(acc, h_ptr, w_ptr, rows, cols, N, V, D, scale, PRECISION, UPCAST, BLOCK_D)
    lse = tl.load(lse_ptr + rows, mask=rows < N, other=0.0)
    g_sum = tl.load(g_sum_ptr + rows, mask=rows < N, other=0.0)  # 0 on padding rows: no gradient
    # dL/dz on this tile, times scale since dz/dhidden = scale * weight and dz/dweight = scale * hidden.
    g = -(g_sum * scale)[:, None] * tl.exp(z - lse[:, None])
    g = tl.where(cols[None, :] < V, g, 0.0).to(h_ptr.dtype.element_ty)  # tensor cores take the input dtype
    for start in range(0, D, BLOCK_D):
        ks = start + tl.arange(0, BLOCK_D)
        k_ok = ks[None, :] < D
        h_offsets, w_offsets = rows[:, None] * D + ks[None, :], cols[:, None] * D + ks[None, :]
        if GRAD_H:
            w = tl.load(w_ptr + w_offsets, mask=col_ok & k_ok, other=0.0)
            dh = _dot(g, w, tl.zeros((BLOCK_N, BLOCK_D), acc_ty), PRECISION, UPCAST)
            tl.atomic_add(grad_h_ptr + h_offsets, dh, mask=row_ok & k_ok, sem="relaxed")
        if GRAD_W:
            h = tl.load(h_ptr + h_offsets, mask=row_ok & k_ok, other=0.0)
            dw = _dot(tl.trans(g), h, tl.zeros((BLOCK_V, BLOCK_D), acc_ty), PRECISION, UPCAST)
            tl.atomic_add(grad_w_ptr + w_offsets, dw, mask=col_ok & k_ok, sem="relaxed")


def _meta(dtype: torch.dtype, blocks: tuple[int, int, int]) -> dict:
    """Compile-time arguments shared by both kernels."""
    block_n, block_v, block_d = blocks
    return dict(
        # float32 inputs follow PyTorch's matmul setting (TF32 only where the user allowed it).
        PRECISION="tf32" if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32 else "ieee",
        UPCAST=_INTERPRET and dtype == torch.bfloat16,
        BLOCK_N=block_n,
        BLOCK_V=block_v,
        BLOCK_D=block_d,
        num_warps=8,  # with 4, the 128 x 128 tiles spill registers (sm_90 compile)
    )


class _FusedTrueFalseLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, true_id, false_id, scale, blocks):
        hidden, weight = hidden.contiguous(), weight.contiguous()
        (N, D), V = hidden.shape, weight.shape[0]
        acc = torch.promote_types(hidden.dtype, torch.float32)  # float32, or float64 for gradcheck
        meta = _meta(hidden.dtype, blocks)
        grid = (triton.cdiv(N, meta["BLOCK_N"]), triton.cdiv(V, meta["BLOCK_V"]))
        # One logsumexp per (row, vocabulary block): N * V / BLOCK_V floats, merged here.
        lse_part = torch.empty(N, grid[1], device=hidden.device, dtype=acc)
        _forward_kernel[grid](hidden, weight, lse_part, N, V, D, scale, **meta)
        lse = torch.logsumexp(lse_part, dim=1)
        z_tf = scale * (hidden.to(acc) @ weight[[true_id, false_id]].to(acc).T)  # two columns: cheap
        ctx.save_for_backward(hidden, weight, lse)
        ctx.ids, ctx.scale, ctx.meta, ctx.grid = (true_id, false_id), scale, meta, grid
        return z_tf[:, 0] - lse, z_tf[:, 1] - lse

    @staticmethod
    def backward(ctx, g_pt, g_pf):
        hidden, weight, lse = ctx.saved_tensors
        (N, D), V = hidden.shape, weight.shape[0]
        acc = lse.dtype
        need_h, need_w = ctx.needs_input_grad[:2]
        g_pt, g_pf = g_pt.to(acc), g_pf.to(acc)  # zeros for an unused output
        # float32 buffers: many tiles add into each row, and bf16 atomics would round every time.
        grad_h = torch.zeros(N, D, device=hidden.device, dtype=acc)
        grad_w = torch.zeros(V, D, device=weight.device, dtype=acc) if need_w else grad_h
        _backward_kernel[ctx.grid](
            hidden, weight, lse, (g_pt + g_pf).contiguous(), grad_h, grad_w, N, V, D, ctx.scale,
            GRAD_H=need_h, GRAD_W=need_w, **ctx.meta,
        )  # fmt: skip
        # The one-hot part: a [k == t] + b [k == f].
        ids = torch.tensor(ctx.ids, device=weight.device)
        g_tf = ctx.scale * torch.stack([g_pt, g_pf], dim=1)  # [N, 2]
        grad_hidden = grad_weight = None
        if need_h:
            grad_hidden = (grad_h + g_tf @ weight[ids].to(acc)).to(hidden.dtype)
        if need_w:
            grad_weight = grad_w.index_add_(0, ids, g_tf.T @ hidden.to(acc)).to(weight.dtype)
        return grad_hidden, grad_weight, None, None, None, None


def triton_fused_true_false_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    true_id: int,
    false_id: int,
    scale: float = 1.0,
    blocks: tuple[int, int, int] = (128, 128, 32),
):
    """log p_true, log p_false (float32 [N]; float64 for float64), logits = scale * hidden @ weight.T.

    hidden [N, d], weight [V, d]. `blocks` = (BLOCK_N, BLOCK_V, BLOCK_D), powers of two >= 16
    (tl.dot); the default compiles for sm_90 without register spills but is untuned on a GPU.
    """
    dtype = torch.promote_types(hidden.dtype, weight.dtype)  # tl.dot needs one dtype
    return _FusedTrueFalseLogprobs.apply(hidden.to(dtype), weight.to(dtype), true_id, false_id, float(scale), blocks)
