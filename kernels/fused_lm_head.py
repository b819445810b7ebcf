"""log p_true, log p_false straight from decoder states and the LM-head weight, a vocabulary slice at a time.

logits = scale * hidden @ weight.T is [N, V] (V = 32,128 for T5); this never builds it whole. The
forward takes each slice's logits from cuBLAS (float32 out of bf16/fp16 inputs on CUDA) and reduces
them with the Triton logsumexp of kernels/true_false_logits.py; it saves hidden, weight and lse [N].
The backward recomputes each slice, turns it into dL/dlogits with the same file's gradient kernel
(RE-RAG eq. 3-4 and eq. 11; docs/kernels.md), and hands that to two cuBLAS products: the slice's
rows of grad weight, and a share of grad hidden. Peak memory is one slice, O(N * SLICE), where eager
PyTorch keeps float32 [N, V] twice; up to ONE_SLICE_ELEMENTS logits the slice is the whole [N, V].
"""

import torch

from kernels.true_false_logits import logsumexp_rows, softmax_grad

SLICE_ELEMENTS = 2**25  # float32 logits per vocabulary slice (128 MiB): bounds the peak memory above ONE_SLICE_ELEMENTS
# Up to this many logits (N * V) the head runs as one slice: there it is launch-bound, and one slice
# lets the logsumexp kernel pick log p_t, log p_f itself (e.g. N = 1280 at V = 32,128).
ONE_SLICE_ELEMENTS = 2**26


def _matmul(a: torch.Tensor, b: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
    """a @ b with products accumulated and returned in acc (float32, or float64 for gradcheck)."""
    if a.is_cuda and a.dtype in (torch.bfloat16, torch.float16) and acc == torch.float32:
        return torch.mm(a, b, out_dtype=torch.float32)  # tensor cores, no rounding of the logits
    return a.to(acc) @ b.to(acc)


def _slices(N: int, V: int, slice_cols: int | None):
    """Vocabulary ranges of at most slice_cols columns (default: all V up to ONE_SLICE_ELEMENTS logits,
    else SLICE_ELEMENTS // N, a multiple of 128)."""
    if slice_cols is None and N * V <= ONE_SLICE_ELEMENTS:
        return [(0, V)]
    cols = slice_cols or max(128, SLICE_ELEMENTS // max(N, 1) // 128 * 128)
    return [(start, min(start + cols, V)) for start in range(0, V, cols)]


class _FusedTrueFalseLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, true_id, false_id, scale, slice_cols):
        acc = torch.promote_types(hidden.dtype, torch.float32)
        (N, _), V = hidden.shape, weight.shape[0]
        slices = _slices(N, V, slice_cols)
        if len(slices) == 1:  # the kernel writes log p_t, log p_f too: fewer launches
            lse, log_pt, log_pf = logsumexp_rows(_matmul(hidden, weight.T, acc), scale, ids=(true_id, false_id))
        else:
            lse = torch.stack([logsumexp_rows(_matmul(hidden, weight[a:b].T, acc), scale) for a, b in slices])
            lse = torch.logsumexp(lse, dim=0)
            # two columns: cheap; rows stacked on the device (a list index would copy from the host,
            # which a CUDA graph cannot capture)
            z_tf = scale * _matmul(hidden, torch.stack((weight[true_id], weight[false_id]), dim=1), acc)
            log_pt, log_pf = z_tf[:, 0] - lse, z_tf[:, 1] - lse
        ctx.save_for_backward(hidden, weight, lse)
        ctx.ids, ctx.scale, ctx.slices = (true_id, false_id), scale, slices
        return log_pt, log_pf

    @staticmethod
    def backward(ctx, g_pt, g_pf):
        hidden, weight, lse = ctx.saved_tensors
        acc, (true_id, false_id) = lse.dtype, ctx.ids
        need_h, need_w = ctx.needs_input_grad[:2]
        grad_h = None  # accumulated in acc over the slices
        grad_w = torch.empty_like(weight) if need_w else None
        for a, b in ctx.slices:
            w = weight[a:b]
            # dL/dlogits of this slice in the inputs' dtype (tensor cores take it); the one-hot terms
            # fall in the slice that holds the id, since ids shifted outside [0, b - a) never match.
            g = softmax_grad(
                _matmul(hidden, w.T, acc), lse, g_pt, g_pf, true_id - a, false_id - a, ctx.scale, hidden.dtype
            )
            if need_h:
                part = _matmul(g, w, acc)
                grad_h = part if grad_h is None else grad_h.add_(part)
            if need_w:  # straight into its rows, in the weight's dtype
                torch.mm(g.T, hidden, out=grad_w[a:b])
        return (grad_h.to(hidden.dtype) if need_h else None), grad_w, None, None, None, None


def triton_fused_true_false_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    true_id: int,
    false_id: int,
    scale: float = 1.0,
    slice_cols: int | None = None,
):
    """log p_true, log p_false (float32 [N]; float64 for float64), logits = scale * hidden @ weight.T.

    hidden [N, d], weight [V, d]; slice_cols vocabulary columns per slice (default: one slice up to
    ONE_SLICE_ELEMENTS logits, else about SLICE_ELEMENTS // N).
    """
    dtype = torch.promote_types(hidden.dtype, weight.dtype)  # one dtype for the products
    hidden, weight = hidden.to(dtype).contiguous(), weight.to(dtype).contiguous()
    return _FusedTrueFalseLogprobs.apply(hidden, weight, true_id, false_id, float(scale), slice_cols)
