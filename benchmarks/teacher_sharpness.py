"""How one-hot is the frozen teacher's Q_G, and how much does a temperature soften it?

Reads a teacher cache written by `rerag fit` (`model.teacher_cache_dir`) and the training file it
was built from; for each training question, BM25's first `--contexts` contexts and the first of its
answers the cache holds, Q_G = softmax_j(F_ij / T) (eq. 9 at T = 1; `model.teacher_temperature`).
Prints, per T, the mean and median largest Q_G, the mean entropy, the share of questions whose
largest Q_G is above 0.99, and the median gap between the teacher's first and second F.

    python benchmarks/teacher_sharpness.py --cache outputs/teacher_cache/<key>.pt --data data/squad/train.jsonl
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from rerag.data.fid_format import read_fid
from rerag.teacher_cache import TeacherScores


def teacher_logliks(scores: TeacherScores, records: list[dict], contexts: int) -> torch.Tensor:
    """F [questions, contexts] from the cache: per question the first answer it holds (KeyError if none)."""
    rows = []
    for r in records:
        ctxs = r["ctxs"][:contexts]
        for answer in r["answers"]:
            try:
                rows.append(scores.lookup([r["question"]], [answer], [ctxs])[0])
                break
            except KeyError:
                continue
        else:
            raise KeyError(f"question {r['id']}: none of its answers is in the teacher cache")
    return torch.stack(rows).float()


def sharpness(answer_loglik: torch.Tensor, temperature: float) -> dict[str, float]:
    """Summary of Q_G = softmax_j(F / T) over questions."""
    q = torch.softmax(answer_loglik / temperature, dim=-1)
    top = q.max(dim=-1).values
    entropy = -(q * q.clamp_min(1e-30).log()).sum(dim=-1)
    return {
        "mean_top": top.mean().item(),
        "median_top": top.median().item(),
        "mean_entropy": entropy.mean().item(),
        "share_top_above_0.99": (top > 0.99).float().mean().item(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True, help="the teacher cache file, <teacher_cache_dir>/<key>.pt")
    parser.add_argument("--data", required=True, help="the training file the cache was built from")
    parser.add_argument("--contexts", type=int, default=4, help="contexts per question (data.n_train_contexts)")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 2.0, 3.0, 4.0])
    args = parser.parse_args()
    f = teacher_logliks(TeacherScores.load(Path(args.cache)), list(read_fid(args.data)), args.contexts)
    ranked = f.sort(dim=-1, descending=True).values
    print(
        f"{len(f)} questions, {f.shape[1]} contexts each (uniform entropy {math.log(f.shape[1]):.2f} nats); "
        f"median gap between the first and second F: {(ranked[:, 0] - ranked[:, 1]).median().item():.1f} nats"
    )
    print("| T | mean largest Q_G | median largest Q_G | mean entropy (nats) | largest above 0.99 |")
    print("|---|---|---|---|---|")
    for t in args.temperatures:
        s = sharpness(f, t)
        print(
            f"| {t:g} | {s['mean_top']:.2f} | {s['median_top']:.2f} | {s['mean_entropy']:.2f} | {s['share_top_above_0.99']:.0%} |"
        )


if __name__ == "__main__":
    main()
