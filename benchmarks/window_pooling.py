"""How should a passage's s come from its windows'? Re-scores a trained RE's test questions under each
`model.window_pooling`, without retraining.

An RE trained on 60-word windows scores a dev/test passage by pooling its windows' log-odds s
(`rerag.models.estimator.pool_windows`). Taking the best window (MaxP) gives a 120-word passage three
windows to win with and a 60-word one a single window. This script scores every window of the
retriever's top `--contexts` once, pools them each way (max, mean, first), and prints per data file
the gold and has-answer Recall@k of each pooling and of the retriever's order, the paired-bootstrap
95% interval of each pooling minus the retriever and minus max (`rerag.infer.compare.interval`),
and among the gold misses how many first picks have more words than the gold passage.

    python benchmarks/window_pooling.py --checkpoint outputs/squad_smollm2_teacher/checkpoints/best.ckpt \\
        --data data/squad/dev.jsonl data/squad/test.jsonl

The windows are the run's own (`data.init_args.eval_context_words`, kept in the checkpoint), or
`--context-words`.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path
from typing import get_args

import torch

from erag.progress import progress
from rerag.data.fid_format import read_fid
from rerag.infer.compare import interval
from rerag.inputs import window_rows
from rerag.metrics import first_hit_rank, hits_at_k
from rerag.models.estimator import RelevanceEstimator, WindowPooling, pool_windows

POOLINGS = list(get_args(WindowPooling))
QUESTIONS_PER_PASS = 8  # questions whose windows share one length-sorted scoring pass


def window_scores(
    estimator: RelevanceEstimator, records: list[dict], n_words: int, batch_size: int, name: str = "windows"
) -> list:
    """Per record, (s of each window [W], the passage of each window [W]), from one scoring pass,
    a few questions at a time so that a long file reports its progress (`erag.progress`)."""
    chunks = [records[i : i + QUESTIONS_PER_PASS] for i in range(0, len(records), QUESTIONS_PER_PASS)]
    words, estimator.context_words = estimator.context_words, None  # the pairs are windows already
    scored = []
    try:
        for chunk in progress(chunks, name, unit="batches"):
            pairs, spans = [], []
            for r in chunk:
                windows, window_of = window_rows(r["ctxs"], n_words)
                spans.append((len(pairs), torch.tensor(window_of)))
                pairs += [(r["question"], w) for w in windows]
            s = estimator.predict(pairs, batch_size)
            scored += [(s[start : start + len(window_of)], window_of) for start, window_of in spans]
    finally:
        estimator.context_words = words
    return scored


def pooled_ranks(records: list[dict], scored: list, pooling: str) -> dict[str, list]:
    """First gold and has-answer ranks (`first_hit_rank`) per question under one pooling, and per
    gold miss whether the first pick has more words than the gold passage."""
    out = {"gold": [], "has_answer": [], "pick longer": []}
    for r, (s, window_of) in zip(records, scored):
        passage_s = pool_windows(s, window_of, len(r["ctxs"]), pooling)
        for relevant in ("gold", "has_answer"):
            out[relevant].append(first_hit_rank(passage_s, torch.tensor([bool(c.get(relevant)) for c in r["ctxs"]])))
        golds = [j for j, c in enumerate(r["ctxs"]) if c.get("gold")]
        pick = int(torch.argmax(passage_s))
        if golds and pick not in golds:
            words = [len(c["text"].split()) for c in r["ctxs"]]
            out["pick longer"].append(words[pick] > words[golds[0]])
    return out


def retriever_ranks(records: list[dict]) -> dict[str, list]:
    """The same first ranks in the retriever's order (the records' context order)."""
    order = [torch.arange(len(r["ctxs"]), 0, -1).float() for r in records]
    return {
        relevant: [
            first_hit_rank(s, torch.tensor([bool(c.get(relevant)) for c in r["ctxs"]])) for s, r in zip(order, records)
        ]
        for relevant in ("gold", "has_answer")
    }


def table(name: str, records: list[dict], scored: list, ks: list[int], resamples: int) -> list[str]:
    """Markdown rows for one data file: the retriever, then each pooling. Recall over every question,
    as `rerag compare` counts it (no gold passage in the top contexts: a miss)."""
    bm25 = retriever_ranks(records)
    per_pooling = {p: pooled_ranks(records, scored, p) for p in POOLINGS}

    def gold(ranks: dict, against: dict | None, k: int) -> str:
        mine = hits_at_k(ranks["gold"], k)
        if against is None:
            return f"{mine.mean():.3f}"
        diff = mine - hits_at_k(against["gold"], k)
        low, high = interval(diff, resamples, 0)
        return f"{mine.mean():.3f} ({diff.mean():+.3f} [{low:+.3f}, {high:+.3f}])"

    rows = []
    for label, ranks in [("BM25", bm25)] + [(p, per_pooling[p]) for p in POOLINGS]:
        recalls = " | ".join(gold(ranks, None if label == "BM25" else bm25, k) for k in ks)
        vs_max = "" if label in ("BM25", "max") else gold(ranks, per_pooling["max"], 1)
        has = " | ".join(f"{hits_at_k(ranks['has_answer'], k).mean():.3f}" for k in ks)
        longer = f"{sum(ranks['pick longer'])} of {len(ranks['pick longer'])}" if label != "BM25" else ""
        rows.append(f"| {name} | {label} | {recalls} | {vs_max} | {has} | {longer} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a checkpoint written by `rerag fit`")
    parser.add_argument("--data", nargs="+", required=True, help="FiD JSONL files with gold and has_answer labels")
    parser.add_argument("--contexts", type=int, default=20, help="the retriever's top contexts per question")
    parser.add_argument("--questions", type=int, default=None, help="the first N questions of each file (all)")
    parser.add_argument("--context-words", type=int, default=None, help="window length (the run's)")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args(argv)

    from rerag.infer.export import load_checkpoint

    estimator, _ = load_checkpoint(args.checkpoint)
    n_words = args.context_words or estimator.context_words
    if not n_words:
        parser.error("the run scored whole passages (no data.init_args.eval_context_words): give --context-words")
    ks_head = " | ".join(f"gold R@{k} (vs BM25)" for k in args.ks)
    lines = [
        f"RE: {args.checkpoint}; windows of {n_words} words over the retriever's top {args.contexts}; "
        "95% paired-bootstrap intervals",
        "",
        f"| data | order | {ks_head} | gold R@1 vs max | "
        + " | ".join(f"has-answer R@{k}" for k in args.ks)
        + " | misses: pick longer than gold |",
        "|---|---|" + "---|" * (2 * len(args.ks) + 2),
    ]
    for path in args.data:
        records = list(itertools.islice(read_fid(path), args.questions))
        records = [r | {"ctxs": r["ctxs"][: args.contexts]} for r in records]
        start = time.perf_counter()
        scored = window_scores(estimator, records, n_words, args.batch_size, name=Path(path).name)
        print(f"{path}: {len(records)} questions scored in {time.perf_counter() - start:.0f} s", flush=True)
        lines += table(path, records, scored, args.ks, args.resamples)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
