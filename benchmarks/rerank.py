"""Reranking throughput: the RE's two LM-head rows against a MonoT5-style full-vocabulary softmax.

    python benchmarks/rerank.py                                   # t5-small-sized, CPU
    python benchmarks/rerank.py --size t5-base --device cuda --contexts 4096 --batch-size 256

Both methods score the same (question, context) batches with the same randomly initialised T5
(sizes from T5Config, the T5 vocabulary of 32128 words; no model hub needed):
- RE: `RelevanceEstimator.forward`, the first decoder state times (w_true - w_false): s = z_true -
  z_false (eq. 4), two rows of the LM head;
- MonoT5: `model(...).logits` at the first decoder step, log_softmax over the whole vocabulary,
  then the "true" column, as MonoT5 rerankers do.
Inputs are `--length` random token ids per context (an encoder pass costs the same for any text).
The two run alternately in one process, `--repeats` passes each; the table gives each one's fastest
pass, since other work on a shared machine only ever slows a pass down.
"""

import argparse
import time

import torch
from transformers import T5Config, T5ForConditionalGeneration

from erag.lm import load_tokenizer
from rerag.models.estimator import RelevanceEstimator

SIZES = {  # d_model, d_ff, d_kv, heads, layers: the shapes of the public T5 checkpoints, and a toy one
    "tiny": (64, 128, 16, 4, 2),  # for smoke runs (benchmarks/gpu_check.py --cpu-dry-run)
    "t5-small": (512, 2048, 64, 8, 6),
    "t5-base": (768, 3072, 64, 12, 12),
    "t5-large": (1024, 4096, 64, 16, 24),
}


def build(size: str, device: torch.device, dtype: torch.dtype) -> RelevanceEstimator:
    d_model, d_ff, d_kv, heads, layers = SIZES[size]
    tokenizer = load_tokenizer("rerag:assets/demo_tokenizer")  # only for the ids of "true" and "false"
    config = T5Config(
        vocab_size=32128,
        d_model=d_model,
        d_ff=d_ff,
        d_kv=d_kv,
        num_heads=heads,
        num_layers=layers,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    model = T5ForConditionalGeneration(config).to(device=device, dtype=dtype).eval()
    return RelevanceEstimator(model, tokenizer)


def monot5_scores(estimator: RelevanceEstimator, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    start = torch.full((len(input_ids), 1), estimator.model.config.decoder_start_token_id, device=input_ids.device)
    logits = estimator.model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=start).logits
    return torch.log_softmax(logits[:, 0].float(), dim=-1)[:, estimator.true_id]


def timed_pass(fn, batches, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for ids, mask in batches:
        fn(ids, mask)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="t5-small")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--contexts", type=int, default=128, help="contexts per timed pass")
    p.add_argument("--batch-size", type=int, default=32, help="contexts per forward pass")
    p.add_argument("--length", type=int, default=128, help="input tokens per (question, context)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--mixed",
        action="store_true",
        help="contexts of mixed lengths (uniform in 16..--length tokens): also time the RE's "
        "length-sorted chunks (score_rows) against chunks in input order",
    )
    args = p.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    torch.manual_seed(0)
    estimator = build(args.size, device, dtype)
    ids = torch.randint(3, 4096, (args.contexts, args.length), device=device)
    lengths = (
        torch.randint(16, args.length + 1, (args.contexts,), device=device)
        if args.mixed
        else torch.full((args.contexts,), args.length, device=device)
    )
    mask = (torch.arange(args.length, device=device) < lengths[:, None]).long()
    # Input order, each batch cut to its own longest row: how rows were scored before length sorting.
    batches = []
    for i in range(0, args.contexts, args.batch_size):
        width = int(lengths[i : i + args.batch_size].max())
        batches.append((ids[i : i + args.batch_size, :width], mask[i : i + args.batch_size, :width]))
    methods = {
        "MonoT5: logits, log_softmax over V": lambda i, m: monot5_scores(estimator, i, m),
        "RE: two LM-head rows (eq. 4)": estimator,
    }
    if args.mixed:
        sorted_pass = [(ids, mask)]  # one call: score_rows sorts and chunks itself
        methods["RE, length-sorted chunks (score_rows)"] = lambda i, m: estimator.score_rows(i, m, args.batch_size)
    seconds = {name: [] for name in methods}
    with torch.inference_mode():

        def passes(name):
            return sorted_pass if name.startswith("RE, length-sorted") else batches

        for name, fn in methods.items():  # warm-up
            timed_pass(fn, passes(name)[:1], device)
        for _ in range(args.repeats):  # alternate, so drifting load hits every method alike
            for name, fn in methods.items():
                seconds[name].append(timed_pass(fn, passes(name), device))
    params = sum(p.numel() for p in estimator.model.parameters()) / 1e6
    print(
        f"{args.size}-sized T5 ({params:.0f}M parameters, V = 32128), {device.type}"
        f"{' ' + torch.cuda.get_device_name() if device.type == 'cuda' else ''}, {args.dtype}, "
        f"{args.contexts} contexts x {'16..' if args.mixed else ''}{args.length} tokens, batch {args.batch_size}, best of {args.repeats}"
    )
    print("\n| method | contexts/s | ms per batch |\n|---|---|---|")
    rate = {}
    for name, times in seconds.items():
        t = min(times)
        rate[name] = args.contexts / t
        print(f"| {name} | {rate[name]:.1f} | {1000 * t / len(batches):.1f} |")
    re_rate, mono_rate = rate["RE: two LM-head rows (eq. 4)"], rate["MonoT5: logits, log_softmax over V"]
    print(f"\nRE / MonoT5 throughput: {re_rate / mono_rate:.2f}x")
    if args.mixed:
        print(f"length-sorted / input order (RE): {rate['RE, length-sorted chunks (score_rows)'] / re_rate:.2f}x")


if __name__ == "__main__":
    main()
