"""How fast does the relevance estimator learn a dataset from a fixed reader's signal?

Scores each training question's first K contexts once with the reader (F_ij, eq. 8), then
trains the demo config's random-init RE alone on L_gen + L_re + L_tok (eq. 12) with F fixed, and
prints dev Recall@1 by step, one row per RE tokenizer. The default data is the foreign world
(`python benchmarks/foreign_world.py --out data/foreign` writes it; `demo_learning.py` does too). A check in minutes, instead of the demo's
joint run, of whether the RE can learn a dataset with a given tokenizer; it chose the demo
tokenizer (BENCHMARKS.md). The RE never sees `has_answer`; dev Recall@1 does.

    OMP_NUM_THREADS=1 python benchmarks/re_learnability.py --data data/foreign \\
        --tokenizers rerag:assets/demo_tokenizer,outputs/old_demo_tokenizer
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import torch
import yaml

from erag.lm import load_tokenizer
from rerag.data.fid_format import read_fid
from rerag.inputs import format_pairs
from rerag.losses import rerag_loss
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, architecture, build_model

ROOT = Path(__file__).resolve().parent.parent


def encode(tokenizer, template: str, records: list[dict], k: int, max_length: int) -> dict:
    return tokenizer(
        format_pairs(
            template, [r["question"] for r in records for _ in range(k)], [c for r in records for c in r["ctxs"][:k]]
        ),
        max_length=max_length,
        truncation=True,
        padding=True,
        return_tensors="pt",
    )


@torch.no_grad()
def reader_scores(reader: Generator, records: list[dict], k: int, max_length: int, batch: int = 4) -> torch.Tensor:
    """F[i, j] = log P_G(first gold answer | q_i, c_ij): [N, K]."""
    out = []
    for i in range(0, len(records), batch):
        chunk = records[i : i + batch]
        enc = encode(reader.tokenizer, reader.template, chunk, k, max_length)
        labels = reader.encode_answers([r["answers"][0] for r in chunk for _ in range(k)])
        out.append(reader.answer_loglik(enc["input_ids"], enc["attention_mask"], labels).view(len(chunk), k))
    return torch.cat(out)


@torch.no_grad()
def recall_at_1(estimator: RelevanceEstimator, records: list[dict], k: int, max_length: int) -> float:
    """Share of questions whose top-scored context holds an answer (as `val/re_recall@1`)."""
    estimator.eval()
    hits = 0
    for i in range(0, len(records), 8):
        chunk = records[i : i + 8]
        enc = encode(estimator.tokenizer, estimator.template, chunk, k, max_length)
        s = estimator(enc["input_ids"], enc["attention_mask"]).view(len(chunk), k)
        hits += sum(r["ctxs"][int(row.argmax())]["has_answer"] for r, row in zip(chunk, s))
    estimator.train()
    return hits / len(records)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "data" / "foreign", help="folder with train.jsonl, dev.jsonl")
    p.add_argument("--tokenizers", default="rerag:assets/demo_tokenizer", help="comma-separated RE tokenizers")
    p.add_argument("--reader", default="rerag:assets/reader")
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml", help="RE shape, lr, lengths, K")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--eval-every", type=int, default=250)
    args = p.parse_args()
    cfg = yaml.safe_load(args.config.read_text())
    model, data = cfg["model"], cfg["data"]
    k, k_eval, length, batch = (
        data["n_train_contexts"],
        data["n_eval_contexts"],
        model["re_max_length"],
        data["batch_size"],
    )
    train, dev = list(read_fid(args.data / "train.jsonl")), list(read_fid(args.data / "dev.jsonl"))
    start = time.time()
    reader = Generator.from_pretrained(args.reader, max_answer_length=model["max_answer_length"])
    targets = reader_scores(reader, train, k, model["generator_max_length"])
    print(f"reader scores for {len(train)} x {k} pairs: {time.time() - start:.0f} s")
    bm25 = sum(r["ctxs"][0]["has_answer"] for r in dev) / len(dev)
    steps = list(range(0, args.steps + 1, args.eval_every))
    rows = []
    for name in args.tokenizers.split(","):
        torch.manual_seed(cfg["seed_everything"])
        rng = random.Random(cfg["seed_everything"])
        tokenizer = load_tokenizer(name)
        estimator = RelevanceEstimator(
            build_model(ModelSpec(config=architecture(ModelSpec(**model["estimator"]))), tokenizer),
            tokenizer,
            model["true_word"],
            model["false_word"],
            model["re_template"],
            length,
        )
        optimizer = torch.optim.AdamW(estimator.parameters(), lr=model["lr"], weight_decay=model["weight_decay"])
        curve, order, start = [recall_at_1(estimator, dev, k_eval, length)], [], time.time()
        for step in range(1, args.steps + 1):
            if len(order) < batch:
                order = rng.sample(range(len(train)), len(train))
            idx = [order.pop() for _ in range(batch)]
            enc = encode(tokenizer, estimator.template, [train[i] for i in idx], k, length)
            log_p_true, log_p_false = estimator.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
            loss = rerag_loss(
                log_p_true.view(batch, k),
                log_p_false.view(batch, k),
                targets[idx],
                model["alpha_re"],
                model["alpha_tok"],
                model["kl_direction"],
            )["loss"]
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(estimator.parameters(), cfg["trainer"]["gradient_clip_val"])
            optimizer.step()
            if step % args.eval_every == 0:
                curve.append(recall_at_1(estimator, dev, k_eval, length))
        lengths = encode(tokenizer, estimator.template, train[:50], k, length)["attention_mask"].sum(1).float().mean()
        rows.append((name, lengths.item(), time.time() - start, curve))
    print(f"\nDev RE Recall@1 by step ({len(dev)} questions, BM25 Recall@1 {bm25:.3f}):\n")
    print("| RE tokenizer | tokens per input | minutes | " + " | ".join(map(str, steps)) + " |")
    print("|---|---|---|" + "---|" * len(steps))
    for name, tokens, seconds, curve in rows:
        print(f"| {name} | {tokens:.0f} | {seconds / 60:.1f} | " + " | ".join(f"{r:.3f}" for r in curve) + " |")


if __name__ == "__main__":
    main()
