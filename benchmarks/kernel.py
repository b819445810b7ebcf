"""Time and peak memory of log p_true, log p_false, forward + backward (docs/kernels.md).

    python benchmarks/kernel.py                        # CUDA: N in {1280, 5120}, V = 32128, d in {768, 1024}
    python benchmarks/kernel.py --device cpu --small   # CPU: tiny shapes, eager vs the reference
    python benchmarks/kernel.py --sweep                # CUDA: launch settings of the Triton kernels, N = 5120
    python benchmarks/kernel.py --host                 # CUDA: the host's time per step against the GPU's

Two tables. "loss": from bf16 logits [N, V], the normalized true/false loss; it is memory-bound, so it
reports effective GB/s = 3 N V bytes-per-element / time (read logits forward, read them backward,
write their gradient) against the device's memory bandwidth. "LM head + loss": from hidden [N, d]
and the LM-head weight [V, d]; it is matmul-bound, so it reports TFLOP/s of the 6 N V d useful
flops (logits, grad hidden, grad weight). Errors are against the float32 reference; peak
memory (above the inputs, gradients included) is measured on CUDA only.

`--sweep` times each Triton kernel alone over its launch settings (kernels/true_false_logits.py:
LSE_LAUNCH, GRAD_LAUNCH) against a device copy of the same logits, and the fused LM head over its
slice size (kernels/fused_lm_head.py: SLICE_ELEMENTS) at N = 1280 and 5120; the defaults are marked.
Rows marked "CUDA graph" replay the method's forward and backward from CUDA graphs: the GPU's time
without the host's per-launch cost.

`--host` says whether the Triton ops wait on the host: per forward + backward step, the time the host
takes to issue it (steps issued without a synchronize), the GPU's time from a torch profile, and
what the driver's launch call costs the host.
"""

import argparse
import statistics
import time

import torch

import kernels
from kernels import reference

# Peak HBM bandwidth, TB/s, matched against torch.cuda.get_device_name() in this order.
BANDWIDTH_TBS = [("H200", 4.8), ("H100", 3.35)]  # H100 = SXM; pass --bandwidth for PCIe/NVL
TRUE_ID, FALSE_ID = 1176, 6136  # any two ids; these are "true" and "false" in T5's vocabulary


def eager_loss(logits):
    """What one writes without this package: a full fp32 log-softmax, then two columns."""
    log_p = torch.log_softmax(logits.float(), dim=-1)
    return log_p[:, TRUE_ID], log_p[:, FALSE_ID]


def loss_methods(device):
    triton = lambda z: kernels.true_false_logprobs(z, TRUE_ID, FALSE_ID, backend="triton")
    ref = lambda z: kernels.true_false_logprobs(z, TRUE_ID, FALSE_ID, backend="reference")
    if device.type == "cpu":
        return {"eager": eager_loss, "reference": ref}
    return {
        "eager": eager_loss,
        "torch.compile": torch.compile(eager_loss, dynamic=False),
        "triton": triton,
        "eager, CUDA graph": cuda_graphed(eager_loss),
        "triton, CUDA graph": cuda_graphed(triton),
    }


def lm_head_methods(device, scale):
    def eager_lm_head(h, w):
        return eager_loss((scale * h) @ w.T)

    def from_logits(backend):
        return lambda h, w: kernels.true_false_logprobs((scale * h) @ w.T, TRUE_ID, FALSE_ID, backend=backend)

    def fused(backend):
        return lambda h, w: kernels.fused_true_false_logprobs(h, w, TRUE_ID, FALSE_ID, scale, backend=backend)

    if device.type == "cpu":
        return {
            "eager": eager_lm_head,
            "reference, from logits": from_logits("reference"),
            "reference, fused": fused("reference"),
        }
    return {
        "eager": eager_lm_head,
        "torch.compile": torch.compile(eager_lm_head, dynamic=False),
        "triton, from logits": from_logits("triton"),
        "triton, fused": fused("triton"),
        "eager, CUDA graph": cuda_graphed(eager_lm_head),
        "triton, fused, CUDA graph": cuda_graphed(fused("triton")),
    }


def cuda_graphed(fn):
    """fn with its forward and backward replayed from CUDA graphs (torch.cuda.make_graphed_callables),
    captured on the first call's inputs: the GPU time without the host's launch cost, which bounds
    these ops at small N. Its peak is the memory the capture reserved (the graphs' private pool)."""

    def call(*inputs):
        if call.graphed is None:
            torch.cuda.empty_cache()  # as capture does: the difference is then the graphs' pool
            before = torch.cuda.memory_reserved()
            call.graphed = torch.cuda.make_graphed_callables(fn, tuple(inputs))
            call.pool_mib = (torch.cuda.memory_reserved() - before) / 2**20
        return call.graphed(*inputs)

    call.graphed = call.pool_mib = None
    return call


def cuda_ms(fn, reps):
    """Median ms of fn() on CUDA, after 3 warm-up calls (compiles here)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    starts, ends = ([torch.cuda.Event(enable_timing=True) for _ in range(reps)] for _ in range(2))
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def measure(fn, inputs, upstream, device, reps):
    """(median ms, peak MiB above the inputs or None on CPU, [log p_t, log p_f, *input grads])."""

    def step():
        for x in inputs:
            x.grad = None
        outputs = fn(*inputs)
        torch.autograd.backward(outputs, upstream)
        return outputs

    if device.type == "cuda":
        ms = cuda_ms(step, reps)  # torch.compile compiles in its warm-up
        for x in inputs:
            x.grad = None
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        outputs = step()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        for _ in range(3):
            step()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            outputs = step()
            times.append((time.perf_counter() - t0) * 1e3)
        ms, peak = statistics.median(times), None
    return ms, peak, [o.detach() for o in outputs] + [x.grad for x in inputs]


def errors(got, want):
    """max |log p - oracle| and max |grad - oracle| / max |oracle grad|."""
    diffs = [(x.float() - y.float()).abs().max().item() for x, y in zip(got, want)]
    scales = [y.float().abs().max().item() for y in want[2:]]
    return max(diffs[:2]), max(d / s for d, s in zip(diffs[2:], scales))


def oracle(fn, inputs, upstream):
    inputs = [x.detach().clone().requires_grad_() for x in inputs]
    outputs = fn(*inputs)
    torch.autograd.backward(outputs, upstream)
    return [o.detach() for o in outputs] + [x.grad for x in inputs]


def run(name, methods, inputs, upstream, want, device, reps, extra):
    """Print one row per method; a method that fails (a torch.compile error, say) prints why."""
    for method, fn in methods.items():
        try:
            ms, peak, got = measure(fn, inputs, upstream, device, reps)
        except Exception as e:  # keep benchmarking the others
            print(f"| {name} | {method} | failed: {type(e).__name__}: {str(e).splitlines()[0][:80]} |")
            continue
        d_logp, d_grad = errors(got, want)
        peak = getattr(fn, "pool_mib", peak)
        mem = f"{peak:.0f}" if peak is not None else "-"
        print(f"| {name} | {method} | {ms:.3f} | {mem} | {extra(ms)} | {d_logp:.1e} | {d_grad:.1e} |")


def sweep(device, dtype, N, V, reps, bandwidth):
    """Tables of the Triton kernels' launch settings and the fused head's slice size (CUDA)."""
    from kernels import fused_lm_head
    from kernels import true_false_logits as T

    gen = torch.Generator(device).manual_seed(0)
    z = (3 * torch.randn(N, V, generator=gen, device=device)).to(dtype)
    g = torch.randn(N, generator=gen, device=device)
    nbytes = N * V * z.element_size()

    def rate(moved, ms):
        gbs = moved / ms / 1e6
        return f"{gbs:.4g} ({100 * gbs / 1e3 / bandwidth:.0f}%)" if bandwidth else f"{gbs:.4g}"

    copy_ms = cuda_ms(lambda: z.clone(), reps)
    print(f"sweep: N = {N}, V = {V}, {dtype}; a device copy of the logits (read + write): {copy_ms:.3f} ms, "
          f"{rate(2 * nbytes, copy_ms)} GB/s\n")  # fmt: skip
    print("logsumexp kernel alone (reads the logits once)")
    print("| BLOCK | num_warps | ms | GB/s (% of peak) |")
    print("|---|---|---|---|")
    for block in (2048, 4096, 8192, 16384):
        for warps in (4, 8, 16):
            launch = dict(BLOCK=block, num_warps=warps)
            ms = cuda_ms(lambda launch=launch: T.logsumexp_rows(z, launch=launch), reps)
            mark = " (default)" if launch == T.LSE_LAUNCH else ""
            print(f"| {block} | {warps} | {ms:.3f}{mark} | {rate(nbytes, ms)} |")
    lse = T.logsumexp_rows(z)
    print("\ngradient kernel alone (reads the logits, writes their gradient)")
    print("| BLOCK | num_warps | ms | GB/s (% of peak) |")
    print("|---|---|---|---|")
    for block in (1024, 2048, 4096, 8192, 16384):
        for warps in (4, 8, 16):
            launch = dict(BLOCK=block, num_warps=warps)
            ms = cuda_ms(lambda launch=launch: T.softmax_grad(z, lse, g, g, TRUE_ID, FALSE_ID, launch=launch), reps)
            mark = " (default)" if launch == T.GRAD_LAUNCH else ""
            print(f"| {block} | {warps} | {ms:.3f}{mark} | {rate(2 * nbytes, ms)} |")
    print("\nfused LM head + loss, forward + backward, d = 768, by slice size (ONE_SLICE_ELEMENTS off)")
    print("| N | SLICE_ELEMENTS | slices | ms | peak MiB | TFLOP/s |")
    print("|---|---|---|---|---|---|")
    d, default, one_slice = 768, fused_lm_head.SLICE_ELEMENTS, fused_lm_head.ONE_SLICE_ELEMENTS
    fused_lm_head.ONE_SLICE_ELEMENTS = 0
    fused = lambda h, w: kernels.fused_true_false_logprobs(h, w, TRUE_ID, FALSE_ID, d**-0.5, backend="triton")
    try:
        for n in (1280, N):
            hidden = torch.randn(n, d, generator=gen, device=device).to(dtype).requires_grad_()
            weight = torch.randn(V, d, generator=gen, device=device).to(dtype).requires_grad_()
            upstream = (torch.randn(n, generator=gen, device=device), torch.randn(n, generator=gen, device=device))
            for elements in (2**23, 2**24, 2**25, 2**26, 2**27):
                fused_lm_head.SLICE_ELEMENTS = elements
                ms, peak, _ = measure(fused, [hidden, weight], upstream, device, reps)
                n_slices = len(fused_lm_head._slices(n, V, None))
                mark = " (default above ONE_SLICE_ELEMENTS)" if elements == default else ""
                tflops = 6 * n * V * d / ms / 1e9
                print(
                    f"| {n} | 2^{elements.bit_length() - 1}{mark} | {n_slices} | {ms:.3f} | {peak:.0f} | {tflops:.3g} |"
                )
    finally:
        fused_lm_head.SLICE_ELEMENTS, fused_lm_head.ONE_SLICE_ELEMENTS = default, one_slice


def host_profile(device, dtype, V, reps):
    """Host time per step against GPU time per step, for the Triton ops (CUDA)."""
    from torch.profiler import ProfilerActivity, profile

    gen = torch.Generator(device).manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, generator=gen, device=device)
    print("forward + backward steps issued without a synchronize; GPU time from a torch profile")
    print("| op | N | host ms/step | GPU ms/step | launches/step | driver µs/launch |")
    print("|---|---|---|---|---|---|")
    for N in (1280, 5120):
        z = (3 * rand(N, V)).to(dtype).requires_grad_()
        h, w = rand(N, 768).to(dtype).requires_grad_(), rand(V, 768).to(dtype).requires_grad_()
        ops = {
            "loss from logits": ([z], lambda z: kernels.true_false_logprobs(z, TRUE_ID, FALSE_ID, backend="triton")),
            "fused head, d = 768": (
                [h, w],
                lambda h, w: kernels.fused_true_false_logprobs(h, w, TRUE_ID, FALSE_ID, 768**-0.5, backend="triton"),
            ),
        }
        upstream = (rand(N), rand(N))
        for name, (inputs, fn) in ops.items():

            def step(inputs=inputs, fn=fn):
                for x in inputs:
                    x.grad = None
                torch.autograd.backward(fn(*inputs), upstream)

            for _ in range(5):
                step()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                step()
            host_ms = (time.perf_counter() - t0) / reps * 1e3
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    step()
                torch.cuda.synchronize()
            events = prof.key_averages()
            kernels_run = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
            gpu_ms = sum(e.self_device_time_total for e in kernels_run) / reps / 1e3
            launches = [e for e in events if e.key in ("cuLaunchKernelEx", "cuLaunchKernel", "cudaLaunchKernel")]
            n_launch = sum(e.count for e in launches)
            launch_us = sum(e.self_cpu_time_total for e in launches) / max(n_launch, 1)
            print(f"| {name} | {N} | {host_ms:.3f} | {gpu_ms:.3f} | {n_launch / reps:.0f} | {launch_us:.1f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny shapes (N in {16, 64}, d in {64, 128})")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--vocab", type=int, default=32128)
    parser.add_argument("--bandwidth", type=float, help="device memory bandwidth in TB/s (default: looked up)")
    parser.add_argument("--reps", type=int, help="timed steps after 3 warmup ones (default: 20 CUDA, 3 CPU)")
    parser.add_argument("--sweep", action="store_true", help="launch settings and slice sizes instead (CUDA, N = 5120)")
    parser.add_argument("--host", action="store_true", help="host time against GPU time per step instead (CUDA)")
    args = parser.parse_args()

    device, dtype, V = torch.device(args.device), getattr(torch, args.dtype), args.vocab
    reps = args.reps or (20 if device.type == "cuda" else 3)
    ns, ds = ([16, 64], [64, 128]) if args.small else ([1280, 5120], [768, 1024])
    bandwidth = args.bandwidth
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        bandwidth = bandwidth or next((tbs for key, tbs in BANDWIDTH_TBS if key in name), None)
        print(f"device: {name}, {bandwidth or '?'} TB/s; torch {torch.__version__}; {args.dtype}; V = {V}\n")
    else:
        print(f"device: cpu ({torch.get_num_threads()} threads); torch {torch.__version__}; {args.dtype}; V = {V}\n")
    if args.sweep:
        return sweep(device, dtype, 5120, V, reps, bandwidth)
    if args.host:
        return host_profile(device, dtype, V, reps)
    gen = torch.Generator(device).manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, generator=gen, device=device)

    print("loss from logits [N, V], forward + backward")
    print("| N | method | ms | peak MiB | GB/s (% of peak) | max Δ log p | max Δ grad (rel) |")
    print("|---|---|---|---|---|---|---|")
    for N in ns:
        logits = (3 * rand(N, V)).to(dtype).requires_grad_()
        upstream = (rand(N), rand(N))
        want = oracle(lambda z: reference.true_false_logprobs(z, TRUE_ID, FALSE_ID), [logits], upstream)

        def gbps(ms, N=N):
            rate = 3 * N * V * logits.element_size() / ms / 1e6
            return f"{rate:.3g} ({100 * rate / 1e3 / bandwidth:.0f}%)" if bandwidth else f"{rate:.3g}"

        run(N, loss_methods(device), [logits], upstream, want, device, reps, gbps)

    print("\nLM head + loss from hidden [N, d] and weight [V, d], forward + backward")
    print("| N, d | method | ms | peak MiB | TFLOP/s | max Δ log p | max Δ grad (rel) |")
    print("|---|---|---|---|---|---|---|")
    for N in ns:
        for d in ds:
            hidden = rand(N, d).to(dtype).requires_grad_()
            weight = rand(V, d).to(dtype).requires_grad_()
            upstream, scale = (rand(N), rand(N)), d**-0.5
            exact = lambda h, w, scale=scale: reference.fused_true_false_logprobs(h, w, TRUE_ID, FALSE_ID, scale)
            want = oracle(exact, [hidden, weight], upstream)
            tflops = lambda ms, N=N, d=d: f"{6 * N * V * d / ms / 1e9:.3g}"
            run(f"{N}, {d}", lm_head_methods(device, scale), [hidden, weight], upstream, want, device, reps, tflops)


if __name__ == "__main__":
    main()
