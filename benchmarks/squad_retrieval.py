"""Retriever recall on the FiD files `rerag make-squad` writes: the share of answerable questions
whose top k holds the gold passage (`gold`) or any passage with an answer string (`has_answer`).

    rerag make-squad --input squad2_dev_5articles.json --out data/squad
    python benchmarks/squad_retrieval.py --data data/squad
"""

import argparse
from pathlib import Path

import torch

from rerag.data.fid_format import read_fid
from rerag.metrics import first_hit_rank, hits_at_k


def recall(records: list[dict], flag: str, k: int) -> float:
    """Recall@k of the file's own (retriever) order by `flag`."""
    ranks = [
        first_hit_rank(
            -torch.arange(len(r["ctxs"]), dtype=torch.float32), torch.tensor([bool(c.get(flag)) for c in r["ctxs"]])
        )
        for r in records
    ]
    return float(hits_at_k(ranks, k).mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/squad", help="the folder `rerag make-squad --out` wrote")
    p.add_argument("--ks", default="1,5,20")
    args = p.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    print("| split | " + " | ".join(f"{flag} R@{k}" for flag in ("gold", "has_answer") for k in ks) + " |")
    print("|---|" + "---|" * (2 * len(ks)))
    for split in ("dev", "test"):
        records = list(read_fid(Path(args.data) / f"{split}.jsonl"))
        cells = [f"{recall(records, flag, k):.3f}" for flag in ("gold", "has_answer") for k in ks]
        print(f"| {split} ({len(records)}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
