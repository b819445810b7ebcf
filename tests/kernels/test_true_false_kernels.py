"""kernels: the Triton paths (run by Triton's interpreter, TRITON_INTERPRET=1 from conftest.py)
against the eager reference, plus dispatch, import without Triton, and the HF `kernels` clash."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kernels
from kernels import reference

triton_only = pytest.mark.skipif(not kernels.HAS_TRITON, reason="triton not installed")
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
GRAD_TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def assert_close(actual, expected, tol):
    """Relative to the largest entry: gradients in low precision round at that scale."""
    expected = expected.to(actual.dtype)
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol * expected.abs().max().clamp(min=1).item())


def assert_all_close(got, want, grad_tol, value_tol=1e-5):
    """[log p_t, log p_f, *grads] against the same from the reference."""
    for i, (x, y) in enumerate(zip(got, want, strict=True)):
        assert_close(x, y, value_tol if i < 2 else grad_tol)


def value_and_grads(fn, inputs, seed=0):
    """[log p_t, log p_f, *input grads] of a random combination a * log p_t + b * log p_f."""
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    log_pt, log_pf = fn(*inputs)
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(2, *log_pt.shape, generator=g, dtype=log_pt.dtype)
    (a * log_pt + b * log_pf).sum().backward()
    return [log_pt.detach(), log_pf.detach(), *(x.grad for x in inputs)]


def reference_float64(fn, inputs, seed=0):
    """`value_and_grads` of `fn` (the eager reference) in float64, on the same inputs exactly and with
    the same random combination: an oracle for every entry, small ones included."""
    inputs = [x.detach().double().requires_grad_() for x in inputs]
    log_pt, log_pf = fn(*inputs)
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(2, *log_pt.shape, generator=g, dtype=torch.float32).double()  # as drawn for float32 outputs
    (a * log_pt + b * log_pf).sum().backward()
    return [log_pt.detach(), log_pf.detach(), *(x.grad for x in inputs)]


def assert_every_entry_close(got, want64, grad_rtol, grad_atol, value_rtol=1e-5, value_atol=1e-6):
    """[log p_t, log p_f, *grads] against `reference_float64`'s, entry by entry: |got - want| <= atol +
    rtol |want| with an absolute part that does not grow with the inputs' scale (equal infinities
    count as close)."""
    for i, (x, y) in enumerate(zip(got, want64, strict=True)):
        rtol, atol = (value_rtol, value_atol) if i < 2 else (grad_rtol, grad_atol)
        torch.testing.assert_close(x.double(), y, rtol=rtol, atol=atol)


def random_logits(n, v, dtype, seed=0):
    return (3 * torch.randn(n, v, generator=torch.Generator().manual_seed(seed))).to(dtype)


def random_lm_head(n, v, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g).to(dtype), torch.randn(v, d, generator=g).to(dtype)


# --- the reference against its definition --------------------------------------------------


def test_reference_matches_log_softmax():
    z = random_logits(4, 50, torch.float32)
    log_pt, log_pf = reference.true_false_logprobs(z, 7, 49)
    log_p = torch.log_softmax(z, dim=-1)
    assert_close(log_pt, log_p[:, 7], 1e-6)
    assert_close(log_pf, log_p[:, 49], 1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_chunked_fused_reference_matches_full_logits(dtype):
    inputs = random_lm_head(5, 50, 12, dtype)
    full = value_and_grads(lambda h, w: reference.true_false_logprobs((0.3 * h.float()) @ w.float().T, 49, 0), inputs)
    chunked = value_and_grads(lambda h, w: reference.fused_true_false_logprobs(h, w, 49, 0, 0.3, chunk_size=16), inputs)
    assert_all_close(chunked, full, 1e-5)


# --- Triton against the reference --------------------------------------------------------------


SMALL_LAUNCH = dict(BLOCK=32, num_warps=1)  # 32 columns per program step


@triton_only
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, v, true_id, false_id", [(6, 100, 99, 3), (1, 77, 0, 76), (3, 64, 5, 5)])
def test_triton_logits_match_reference(dtype, n, v, true_id, false_id):
    # V = 100 and 77 are not multiples of 32; ids in the first and last columns.
    from kernels.true_false_logits import triton_true_false_logprobs

    z = random_logits(n, v, dtype)
    fn = lambda x: triton_true_false_logprobs(x, true_id, false_id, SMALL_LAUNCH, SMALL_LAUNCH)
    got = value_and_grads(fn, [z])
    want = value_and_grads(lambda x: reference.true_false_logprobs(x, true_id, false_id), [z])
    assert [x.dtype for x in got] == [torch.float32, torch.float32, dtype]
    assert_all_close(got, want, GRAD_TOL[dtype])


@triton_only
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, v, d", [(19, 50, 20), (1, 33, 16)])
@pytest.mark.parametrize("slice_cols", [16, None])
def test_triton_fused_matches_reference(dtype, n, v, d, slice_cols):
    # Vocabulary slices of 16 columns: V is not a multiple; the true id in the last slice, the false one in
    # the first. None: the default, one slice at these sizes (the kernel picks log p_t, log p_f itself).
    from kernels.fused_lm_head import triton_fused_true_false_logprobs

    inputs = random_lm_head(n, v, d, dtype)
    got = value_and_grads(lambda h, w: triton_fused_true_false_logprobs(h, w, v - 1, 2, 0.25, slice_cols), inputs)
    want = value_and_grads(lambda h, w: reference.fused_true_false_logprobs(h, w, v - 1, 2, 0.25), inputs)
    assert [x.dtype for x in got] == [torch.float32, torch.float32, dtype, dtype]
    assert_all_close(got, want, GRAD_TOL[dtype])


@triton_only
def test_triton_fused_default_slices_and_frozen_weight():
    hidden, weight = random_lm_head(5, 300, 40, torch.float32)
    h = hidden.clone().requires_grad_()
    log_pt, log_pf = kernels.fused_true_false_logprobs(h, weight, 299, 1, backend="triton")
    (log_pt - 2 * log_pf).sum().backward()
    h_ref = hidden.clone().requires_grad_()
    ref_pt, ref_pf = reference.fused_true_false_logprobs(h_ref, weight, 299, 1)
    (ref_pt - 2 * ref_pf).sum().backward()
    assert_close(log_pt, ref_pt, 1e-5)
    assert_close(h.grad, h_ref.grad, 1e-5)


@triton_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_triton_logits_extreme_values(dtype):
    from kernels.true_false_logits import triton_true_false_logprobs

    z = random_logits(4, 70, torch.float32)
    z[0, 10], z[1, 20] = 1e4, -1e4  # one dominant logit; one far below
    z[2, 30:40] = float("-inf")  # masked columns
    z[3, :] = float("-inf")
    z[3, 50] = 0.0  # a single finite logit, after two all -inf blocks of 32
    z[1, 69] = float("-inf")  # the true column itself masked: log p_t = -inf
    z = z.to(dtype)
    got = value_and_grads(lambda x: triton_true_false_logprobs(x, 69, 10, SMALL_LAUNCH, SMALL_LAUNCH), [z])
    want = reference_float64(lambda x: reference.true_false_logprobs(x, 69, 10), [z])
    assert not got[2].isnan().any()
    assert got[0][1] == float("-inf")
    # every entry, the ~1e-4 log-probabilities beside the ~1e4 ones and the gradient's near-zero entries
    # included; the gradient is rounded to the input's dtype, hence its relative tolerance
    assert_every_entry_close(got, want, GRAD_TOL[dtype], 1e-6)


@triton_only
def test_triton_fused_extreme_scale():
    inputs = random_lm_head(8, 40, 16, torch.float32)
    got = value_and_grads(lambda h, w: kernels.fused_true_false_logprobs(h, w, 39, 0, 300.0, backend="triton"), inputs)
    want = reference_float64(lambda h, w: reference.fused_true_false_logprobs(h, w, 39, 0, 300.0), inputs)  # |z| ~ 1e3
    assert all(x.isfinite().all() for x in got)
    # fp32 logits ~1e3 carry absolute errors ~1e-4 into exp(): the hidden states' gradient (entries 2.3 to
    # 2.4e3 here) is off by up to 0.011 beyond 1e-3 of each entry (the float32 reference by 0.006), so
    # every entry is checked to within 0.03 + 1e-3 of itself; the weight's (most entries below 1e-6:
    # rows the softmax gives ~0) to within 1e-6
    assert_every_entry_close(got[:3], want[:3], 1e-3, 0.03)
    assert_every_entry_close(got[:2] + got[3:], want[:2] + want[3:], 1e-3, 1e-6)


@pytest.mark.parametrize("backend", ["reference", pytest.param("triton", marks=triton_only)])
def test_gradcheck_float64(backend):
    # fast_mode checks random projections of the Jacobian: few forwards, which the interpreter needs.
    z = random_logits(3, 37, torch.float64).requires_grad_()
    hidden, weight = random_lm_head(3, 37, 18, torch.float64)
    fn = lambda x: kernels.true_false_logprobs(x, 36, 0, backend=backend)
    assert torch.autograd.gradcheck(fn, (z,), fast_mode=True)
    assert torch.autograd.gradcheck(
        lambda h, w: kernels.fused_true_false_logprobs(h, w, 36, 0, 0.5, backend=backend),
        (hidden.requires_grad_(), weight.requires_grad_()),
        fast_mode=True,
    )


@triton_only
def test_gradcheck_float64_vocabulary_slices():
    from kernels.fused_lm_head import triton_fused_true_false_logprobs

    hidden, weight = random_lm_head(3, 37, 18, torch.float64)
    assert torch.autograd.gradcheck(
        lambda h, w: triton_fused_true_false_logprobs(h, w, 36, 0, 0.5, 16),  # three slices, ids in the first and last
        (hidden.requires_grad_(), weight.requires_grad_()),
        fast_mode=True,
    )


# The interpreter accepts code that the compiler rejects: compile the real kernels for an H100
# (sm_90) here, without a GPU, as the CUDA path will. A subprocess, since the interpreter must be off.
COMPILE_FOR_SM90 = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernels import true_false_logits as T

def compile_sm90(fn, signature, constexprs, num_warps):
    signature = {**signature, **{name: "constexpr" for name in constexprs}}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})

f32, i = "*fp32", "i32"
for z in ("*bf16", f32):  # bf16 logits; float32 ones, the fused LM head's slices (bf16 gradient out)
    for pick in (True, False):
        compile_sm90(T._lse_kernel, dict(z_ptr=z, stride=i, lse_ptr=f32, log_pt_ptr=f32, log_pf_ptr=f32, V=i,
                     true_id=i, false_id=i, scale="fp32"), dict(PICK=pick, BLOCK=T.LSE_LAUNCH["BLOCK"]),
                     T.LSE_LAUNCH["num_warps"])
    compile_sm90(T._grad_kernel, dict(z_ptr=z, z_stride=i, grad_ptr="*bf16", grad_stride=i, lse_ptr=f32,
                 g_pt_ptr=f32, g_pf_ptr=f32, V=i, true_id=i, false_id=i, scale="fp32"),
                 dict(BLOCK=T.GRAD_LAUNCH["BLOCK"]), T.GRAD_LAUNCH["num_warps"])
"""


@triton_only
@pytest.mark.slow
def test_kernels_compile_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path), TRITON_DEFAULT_FP_FUSION="1")
    result = subprocess.run([sys.executable, "-c", COMPILE_FOR_SM90], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


# --- public API, dispatch and packaging --------------------------------------------------------


def test_leading_dims_and_autocast():
    z = random_logits(2 * 3, 40, torch.float32)
    log_pt, log_pf = kernels.true_false_logprobs(z.view(2, 3, 40), 1, 2)
    assert log_pt.shape == log_pf.shape == (2, 3)
    assert_close(log_pt.flatten(), reference.true_false_logprobs(z, 1, 2)[0], 1e-6)

    hidden, weight = random_lm_head(4, 40, 16, torch.float32)
    weight.requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # like F.linear: the LM head runs in bf16
        log_pt, _ = kernels.fused_true_false_logprobs(hidden.view(2, 2, 16), weight, 1, 2)
    log_pt.sum().backward()
    assert log_pt.dtype == torch.float32 and weight.grad.dtype == torch.float32
    want, _ = reference.fused_true_false_logprobs(hidden.bfloat16(), weight.detach().bfloat16(), 1, 2)
    assert_close(log_pt.flatten(), want, 1e-5)


def test_dispatch(monkeypatch):
    def boom(*args):
        raise AssertionError("triton path taken")

    monkeypatch.setattr(kernels, "triton_true_false_logprobs", boom, raising=False)
    monkeypatch.setattr(kernels, "triton_fused_true_false_logprobs", boom, raising=False)
    monkeypatch.setattr(kernels, "HAS_TRITON", True)
    z = random_logits(2, 10, torch.float32)
    hidden, weight = random_lm_head(2, 10, 4, torch.float32)
    kernels.true_false_logprobs(z, 0, 1)  # CPU tensors: the reference by default
    kernels.fused_true_false_logprobs(hidden, weight, 0, 1)
    with pytest.raises(AssertionError, match="triton path"):
        kernels.true_false_logprobs(z, 0, 1, backend="triton")
    monkeypatch.setenv("RERAG_KERNELS_BACKEND", "triton")
    with pytest.raises(AssertionError, match="triton path"):
        kernels.fused_true_false_logprobs(hidden, weight, 0, 1)
    kernels.true_false_logprobs(z, 0, 1, backend="reference")  # the argument beats the variable
    with pytest.raises(ValueError, match="backend"):
        kernels.true_false_logprobs(z, 0, 1, backend="cuda")
    with pytest.raises(IndexError, match="true_id=10"):
        kernels.true_false_logprobs(z, 10, 1)


def test_import_without_triton():
    code = (
        "import sys; sys.modules['triton'] = None\n"  # any `import triton` now raises ImportError
        "import torch, kernels\n"
        "assert not kernels.HAS_TRITON\n"
        "print(kernels.true_false_logprobs(torch.zeros(2, 4), 0, 1)[0].tolist())\n"
        "try:\n"
        "    kernels.true_false_logprobs(torch.zeros(2, 4), 0, 1, backend='triton')\n"
        "except ImportError:\n"
        "    print('ImportError')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["[-1.3862943649291992,", "-1.3862943649291992]", "ImportError"]


def test_hf_kernels_not_detected():
    # Our `kernels` import name is HF's too; transformers must not take it for HF's (README, "Known conflicts").
    from transformers.utils.import_utils import is_kernels_available

    assert not is_kernels_available()


def test_kernels_imports_as_this_projects_outside_the_checkout(tmp_path):
    # From another folder (a user's script, the `rerag` script) no installed `kernels` shadows ours.
    code = "import kernels, rerag.models.estimator; print(kernels.__file__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert Path(result.stdout.strip()).parent == Path(kernels.__file__).parent
