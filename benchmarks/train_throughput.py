"""Questions/s of one full RE-RAG training step (RE + generator forward, the three losses,
backward, AdamW), random-init T5s of a chosen size, K contexts per question, and the model FLOPs
utilization (MFU) of that step on a GPU.

    python benchmarks/train_throughput.py                          # CPU: tiny and t5-small sizes
    python benchmarks/train_throughput.py --device cuda --sizes t5-base --batch 8 --precision bf16
    python benchmarks/train_throughput.py --sizes tiny --compile inductor     # eager vs torch.compile

With --compile BACKEND the same step also runs with the models' encoder and decoder stacks compiled
(`rerag.models.compilation.compile_stacks`, what `model.assembly.compile` does in training), on a second pair
of models; eager and compiled steps alternate, so drifting load on a shared machine slows both alike,
and a last table gives the compiled / eager throughput ratio and the compile time (the warm-up steps,
where dynamo traces and the backend compiles).

Model FLOPs per step: 6 x parameters x tokens (2 for the forward matmuls, 4 for the backward's),
summed over both models, each token counted against the weights it passes through:

    FLOPs = sum over RE, generator of 6 x (P_enc x T_enc + (P_dec + V d) x T_dec)

P_enc, P_dec: the encoder's and the decoder's parameters without the token embedding (a lookup,
no FLOPs); V d: the LM head, a matmul for every decoder token (T5 ties it to the embedding, so it
is not in P_dec). T_enc = B K L input tokens (B questions, K contexts, L = --seq-len) for each
model; T_dec = B K for the RE (one decoder step, eq. 4) and B K A for the generator (A =
--answer-len). Counting a T5's whole parameter count against encoder + decoder tokens would
give 2.6 times the figure at t5-base size (an encoder token never meets the decoder's weights, and
decoder tokens are few). Attention scores (12 x layers x d x L FLOPs per token, about 3% at
L = 128 for t5-base) are left out, as in the usual 6ND, so the MFU is a slight underestimate.

MFU = FLOPs / (s/step) / the device's dense bf16 peak: 989 TFLOP/s for H100 SXM and H200 (NVIDIA's
datasheets, without sparsity), looked up by torch.cuda.get_device_name(); --peak-tflops overrides
it (and sets one for other devices or precisions).
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import T5Config, T5ForConditionalGeneration

from erag.lm import load_tokenizer
from rerag.losses import rerag_loss
from rerag.models.compilation import compile_stacks
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator

# Dense bf16 peak, TFLOP/s, matched against torch.cuda.get_device_name() in this order (the PCIe and
# NVL H100s clock lower than the SXM one, whose name carries no form factor: "NVIDIA H100 80GB HBM3").
PEAK_BF16_TFLOPS = [("H200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0)]

SIZES = {  # T5 shapes; vocabulary as T5's (32,128) so the RE's softmax is the real size
    "tiny": dict(d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=2),
    "t5-small": dict(d_model=512, d_ff=2048, d_kv=64, num_heads=8, num_layers=6),
    "t5-base": dict(d_model=768, d_ff=3072, d_kv=64, num_heads=12, num_layers=12),
}


def model_flops(model, n_rows: int, enc_len: int, dec_len: int) -> float:
    """Forward + backward FLOPs of one encoder-decoder over n_rows sequences (see the docstring)."""

    def body(stack):  # an encoder or decoder stack without its token embedding
        return sum(p.numel() for name, p in stack.named_parameters() if "embed_tokens" not in name)

    head = model.get_output_embeddings().weight.numel()
    return 6.0 * n_rows * (body(model.get_encoder()) * enc_len + (body(model.get_decoder()) + head) * dec_len)


def build_step(size: str, args, compile_backend: str | None = None):
    """(one training step as a function, model FLOPs per step); models compiled with
    `compile_backend` when one is given."""
    tok = load_tokenizer("rerag:assets/demo_tokenizer")
    cfg = T5Config(
        vocab_size=32128, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, dropout_rate=0.0, **SIZES[size]
    )
    dev = torch.device(args.device)
    torch.manual_seed(0)  # eager and compiled models start from the same weights
    re = RelevanceEstimator(T5ForConditionalGeneration(cfg), tok).to(dev)
    gen = Generator(T5ForConditionalGeneration(cfg), tok).to(dev)
    if compile_backend:
        compile_stacks(re, {"backend": compile_backend})
        compile_stacks(gen, {"backend": compile_backend})
    opt = torch.optim.AdamW(list(re.parameters()) + list(gen.parameters()), lr=1e-4)
    n = args.batch * args.contexts
    ids = torch.randint(3, 2800, (n, args.seq_len), device=dev)
    mask = torch.ones_like(ids)
    labels = torch.randint(3, 2800, (n, args.answer_len), device=dev)
    dtype = {"fp32": None, "bf16": torch.bfloat16}[args.precision]

    def step():
        with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            lp_t, lp_f = re.true_false_logprobs(ids, mask)
            f = gen.answer_loglik(ids, mask, labels)
            loss = rerag_loss(*(x.view(args.batch, args.contexts) for x in (lp_t, lp_f, f)))["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    flops = (
        model_flops(re.model, n, args.seq_len, 1)  # the RE reads one decoder step
        + model_flops(gen.model, n, args.seq_len, args.answer_len)
    )
    return step, flops


def timed(fn, args, times: int) -> float:
    """Seconds for `times` calls of fn."""
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(times):
        fn()
    sync()
    return time.perf_counter() - start


def step_times(size: str, args) -> tuple[dict[str, float], float, float | None]:
    """({"eager": s/step, and "compiled" with --compile}, model FLOPs per step, the compiled warm-up's
    time beyond its steps' own: what tracing and compiling cost)."""
    eager, flops = build_step(size, args)
    steps = {"eager": eager} | ({"compiled": build_step(size, args, args.compile)[0]} if args.compile else {})
    warmup = max(args.warmup, 1 if args.compile else 0)  # compiling happens in the first step
    warmup_s = {name: timed(fn, args, warmup) for name, fn in steps.items()}
    total = dict.fromkeys(steps, 0.0)
    for _ in range(args.steps):  # alternate, one step each
        for name, fn in steps.items():
            total[name] += timed(fn, args, 1)
    per_step = {name: t / args.steps for name, t in total.items()}
    compile_s = warmup_s["compiled"] - warmup * per_step["compiled"] if args.compile else None
    return per_step, flops, compile_s


def peak_tflops(args) -> float | None:
    if args.peak_tflops:
        return args.peak_tflops
    if args.device.startswith("cuda") and args.precision == "bf16":
        name = torch.cuda.get_device_name(torch.device(args.device))
        return next((tflops for key, tflops in PEAK_BF16_TFLOPS if key in name), None)
    return None  # no table for CPUs or fp32 peaks: pass --peak-tflops


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="tiny,t5-small")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch", type=int, default=2, help="questions per step")
    p.add_argument("--contexts", type=int, default=20, help="K contexts per question")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--answer-len", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument(
        "--compile",
        metavar="BACKEND",
        help="also time the step with the stacks compiled by torch.compile(backend=BACKEND), e.g. "
        "inductor (needs a C++ compiler on CPU) or aot_eager, and print compiled / eager",
    )
    p.add_argument(
        "--peak-tflops",
        type=float,
        help="device peak for the MFU column, TFLOP/s (default: a known GPU's dense bf16 peak, with bf16)",
    )
    args = p.parse_args()
    torch.manual_seed(0)
    device = torch.cuda.get_device_name(torch.device(args.device)) if args.device.startswith("cuda") else args.device
    peak = peak_tflops(args)
    print(
        f"device: {device} ({torch.get_num_threads()} threads), torch {torch.__version__}, {args.precision}, "
        f"batch {args.batch} questions x K={args.contexts} contexts x {args.seq_len} tokens, "
        f"{args.answer_len} answer tokens; MFU against {f'{peak:g} TFLOP/s' if peak else 'no known peak'}"
    )
    print("| size | s/step | questions/s | contexts/s | model TFLOP/step | TFLOP/s | MFU |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for size in args.sizes.split(","):
        per_step, flops, compile_s = step_times(size, args)
        for name, t in per_step.items():
            label = size if name == "eager" else f"{size}, compiled ({args.compile})"
            mfu = f"{100 * flops / t / 1e12 / peak:.1f}%" if peak else "-"
            print(
                f"| {label} | {t:.3f} | {args.batch / t:.2f} | {args.batch * args.contexts / t:.1f} | "
                f"{flops / 1e12:.3g} | {flops / t / 1e12:.3g} | {mfu} |"
            )
        if args.compile:
            ratios.append(
                f"| {size} | {args.compile} | {per_step['eager'] / per_step['compiled']:.2f}x | {compile_s:.1f} |"
            )
    if ratios:
        print("\n| size | backend | compiled / eager questions/s | compile time, s (warm-up beyond a step's time) |")
        print("|---|---|---|---|")
        print("\n".join(ratios))


if __name__ == "__main__":
    main()
