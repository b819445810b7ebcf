"""Where in the retriever's order does the RE's first pick sit when it is not the gold passage?

For each test run (`test_results.jsonl`, written by `rerag.callbacks.MetricsWriter`) and the data file
it was tested on, counts the questions whose RE puts a passage other than the gold one first, splits
them by the retriever's rank of that first pick and of the gold passage (`first_hit`) in the bins
`--bins` gives (the default 1, 2-4, 5-20: BM25's first, the rest of the top 4 the SmolLM2 configs
train on, and the deeper ranks only evaluation shows the RE), and counts those whose first pick has
more words than the gold passage.

    python benchmarks/first_pick_ranks.py --runs outputs/squad_smollm2_teacher/test_results.jsonl \\
        --data data/squad/test.jsonl
"""

from __future__ import annotations

import argparse

from rerag.data.fid_format import read_fid
from rerag.infer.compare import load_results


def bin_label(rank: int, bins: list[int]) -> str:
    """The bin of a 1-based rank: '1', '2-4', '5-20' or '>20' for bins [1, 4, 20]."""
    low = 1
    for high in bins:
        if rank <= high:
            return str(high) if low == high else f"{low}-{high}"
        low = high + 1
    return f">{bins[-1]}"


def first_pick_ranks(results: list[dict], records: dict[str, dict], bins: list[int]) -> dict[str, int]:
    """Counts over `results` (one per test question, with `contexts` in the RE's order): the questions
    with a gold passage, the RE's misses among them, per bin the misses whose first pick (`pick ...`)
    and whose gold passage (`gold ...`) sit at that retriever rank, and the misses whose first pick
    is the longer passage (in words)."""
    labels = [bin_label(b, bins) for b in bins] + [f">{bins[-1]}"]
    counts = {"with gold": 0, "RE misses": 0} | {f"{what} {label}": 0 for what in ("pick", "gold") for label in labels}
    counts["pick longer than gold"] = 0
    for r in results:
        gold_rank = r["first_hit"]["retriever"]["gold"]
        if gold_rank is None:
            continue
        counts["with gold"] += 1
        if r["first_hit"]["re"]["gold"] == 1:
            continue
        if r["id"] not in records:
            raise ValueError(f"question {r['id']!r} of the results is not in the data file: test on another file?")
        ctxs = records[r["id"]]["ctxs"]
        ids = [c["id"] for c in ctxs]
        if r["contexts"][0]["id"] not in ids:
            raise ValueError(f"question {r['id']!r}: first pick {r['contexts'][0]['id']!r} is not among its contexts")
        pick_rank = ids.index(r["contexts"][0]["id"]) + 1
        counts["RE misses"] += 1
        counts[f"pick {bin_label(pick_rank, bins)}"] += 1
        counts[f"gold {bin_label(gold_rank, bins)}"] += 1
        words = [len(c["text"].split()) for c in ctxs]
        counts["pick longer than gold"] += words[pick_rank - 1] > words[gold_rank - 1]
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="test_results.jsonl files")
    parser.add_argument(
        "--data", nargs="+", required=True, help="the data file each run was tested on (one, or one per run)"
    )
    parser.add_argument("--bins", type=int, nargs="+", default=[1, 4, 20], help="upper ends of the rank bins")
    args = parser.parse_args()
    if len(args.data) not in (1, len(args.runs)):
        parser.error(f"--data: give one file or one per run ({len(args.runs)}), got {len(args.data)}")
    data = args.data * len(args.runs) if len(args.data) == 1 else args.data
    rows = []
    for run, path in zip(args.runs, data):
        records = {r["id"]: r for r in read_fid(path)}  # a bad record names its file, line and field
        results = load_results(run, fields=("first_hit", "contexts"))  # so does a bad result row
        try:
            rows.append((run, first_pick_ranks(list(results.values()), records, args.bins)))
        except ValueError as err:
            raise SystemExit(f"{run} tested on {path}: {err}") from None
    columns = list(rows[0][1])
    print(f"| run | {' | '.join(columns)} |")
    print("|---" * (len(columns) + 1) + "|")
    for run, counts in rows:
        print(f"| {run} | {' | '.join(str(counts[c]) for c in columns)} |")


if __name__ == "__main__":
    main()
