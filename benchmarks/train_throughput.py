"""Questions/s of one full RE-RAG training step (RE + generator forward, the three losses,
backward, AdamW), random-init T5s of a chosen size, K contexts per question.

    python benchmarks/train_throughput.py                          # CPU: tiny and t5-small sizes
    python benchmarks/train_throughput.py --device cuda --sizes t5-base --batch 8 --precision bf16
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run as a script from the repository: keep this folder from shadowing the packages.
sys.path = [p for p in sys.path if Path(p).resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402
from transformers import T5Config, T5ForConditionalGeneration  # noqa: E402

from rerag.losses import rerag_loss  # noqa: E402
from rerag.models.estimator import RelevanceEstimator  # noqa: E402
from rerag.models.generator import Generator  # noqa: E402
from rerag.models.loading import load_tokenizer  # noqa: E402

SIZES = {  # T5 shapes; vocabulary as T5's (32,128) so the RE's softmax is the real size
    "tiny": dict(d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=2),
    "t5-small": dict(d_model=512, d_ff=2048, d_kv=64, num_heads=8, num_layers=6),
    "t5-base": dict(d_model=768, d_ff=3072, d_kv=64, num_heads=12, num_layers=12),
}


def step_time(size: str, args) -> float:
    tok = load_tokenizer("rerag:assets/demo_tokenizer")
    cfg = T5Config(vocab_size=32128, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
                   dropout_rate=0.0, **SIZES[size])
    dev = torch.device(args.device)
    re = RelevanceEstimator(T5ForConditionalGeneration(cfg), tok).to(dev)
    gen = Generator(T5ForConditionalGeneration(cfg), tok).to(dev)
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

    for _ in range(args.warmup):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / args.steps


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
    args = p.parse_args()
    torch.manual_seed(0)
    print(f"device: {args.device} ({torch.get_num_threads()} threads), torch {torch.__version__}, {args.precision}, "
          f"batch {args.batch} questions x K={args.contexts} contexts x {args.seq_len} tokens")
    print("| size | s/step | questions/s | contexts/s |\n|---|---|---|---|")
    for size in args.sizes.split(","):
        t = step_time(size, args)
        print(f"| {size} | {t:.3f} | {args.batch / t:.2f} | {args.batch * args.contexts / t:.1f} |")


if __name__ == "__main__":
    main()
