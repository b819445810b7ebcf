"""Voter throughput (questions/s) with cached against uncached similarities, on the CPU.

Uncached: every vote recomputes the pairwise similarities of eq. 6 from the answer strings
(`Voter.vote`). Cached: the [Q, R, R, M] tensor is computed once and each vote is a tensor
operation (`Voter.select`), which is what every Nelder-Mead objective evaluation does.

    python benchmarks/eor_voter.py [--questions 512] [--retrievers 16] [--threads 1] [--encoder PATH]

`--encoder` adds an embedding-similarity metric from a local sentence-transformers or HF encoder.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from eor import EmbeddingSimilarity, ExactMatch, TokenF1, Voter, VoterWeights, similarity_tensor


def synthetic_answers(num_questions: int, num_retrievers: int, seed: int = 0) -> list[list[str]]:
    """[R][Q] answers: each retriever is right with its own probability, else one of a few wrong answers."""
    rng = np.random.default_rng(seed)
    accuracy = rng.uniform(0.3, 0.7, num_retrievers)
    return [
        [
            f"the answer to question {q}" if rng.random() < accuracy[r] else f"wrong answer {rng.integers(4)} of {q}"
            for q in range(num_questions)
        ]
        for r in range(num_retrievers)
    ]


def per_second(fn, repeats: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=512)
    parser.add_argument("--retrievers", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--encoder", help="path of a local encoder for an embedding-similarity metric")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads; the voter's tensors are small, so one thread avoids sync overhead",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    metric_sets = [[ExactMatch(), TokenF1()]]
    if args.encoder:
        metric_sets.append([ExactMatch(), TokenF1(), EmbeddingSimilarity(args.encoder)])
    answers = synthetic_answers(args.questions, args.retrievers)
    names = [f"r{i}" for i in range(args.retrievers)]
    by_name = dict(zip(names, answers))

    print(
        f"voter throughput, {args.retrievers} retrievers, {args.questions} questions, "
        f"{torch.get_num_threads()} CPU threads, mean of {args.repeats} runs"
    )
    print("| metrics | similarities | seconds per pass | questions/s | speedup |")
    print("|---|---|---|---|---|")
    for metrics in metric_sets:
        weights = VoterWeights({m.name: 0.3 for m in metrics}, {n: 0.3 for n in names})
        voter = Voter(metrics, weights)
        sim = similarity_tensor(answers, metrics)
        uncached = per_second(lambda: voter.vote(by_name), args.repeats)
        cached = per_second(lambda: voter.select(sim), max(args.repeats, 20))
        label = "+".join(m.name for m in metrics)
        for mode, seconds in (("uncached", uncached), ("cached", cached)):
            print(
                f"| {label} | {mode} | {seconds:.4f} | {args.questions / seconds:,.0f} | {uncached / seconds:,.0f}x |"
            )


if __name__ == "__main__":
    main()
