"""How often is the gold passage the longest of BM25's top k in training, with whole passages and
with the training windows (`data.init_args.train_context_words`)? And how often does the gold
passage's window still hold an answer string? Counts over the questions whose top k holds a gold
passage, with the windows training draws (`rerag.data.datamodule.word_window`, seeded as in training).

    rerag make-squad --input squad2_dev_5articles.json --out data/squad
    python benchmarks/length_shortcut.py --file data/squad/train.jsonl --words 40 50 60 70
"""

import argparse
import random

from erag.answers import has_answer
from rerag.data.datamodule import word_window
from rerag.data.fid_format import read_fid


def counts(records: list[dict], k: int, words: int | None, seed: int) -> tuple[int, float, float]:
    """(questions, share whose gold passage is strictly the longest, share whose gold window holds an answer)."""
    n = longest = kept = 0
    for r in records:
        top = r["ctxs"][:k]
        gold = [bool(c.get("gold")) for c in top]
        if not any(gold):
            continue
        if words:
            top = [word_window(c, words, random.Random(f"{seed}:{r['id']}:{c['id']}")) for c in top]
        lengths = [len(c["text"].split()) for c in top]
        g = gold.index(True)
        n += 1
        longest += lengths[g] == max(lengths) and lengths.count(max(lengths)) == 1
        kept += has_answer(top[g]["text"], r["answers"])
    return n, longest / n, kept / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", default="data/squad/train.jsonl")
    p.add_argument("--k", type=int, default=4, help="BM25's top k, as data.init_args.n_train_contexts")
    p.add_argument("--words", type=int, nargs="*", default=[40, 50, 60, 70])
    p.add_argument("--seed", type=int, default=0, help="data.init_args.seed")
    args = p.parse_args()
    records = list(read_fid(args.file))
    print(
        f"\n{args.file}, BM25's top {args.k}\n\n| windows | questions | gold strictly longest | gold window holds an answer |"
    )
    print("|---|---|---|---|")
    for words in [None, *args.words]:
        n, longest, kept = counts(records, args.k, words, args.seed)
        print(f"| {words or 'whole passages'} | {n} | {longest:.3f} | {kept:.3f} |")


if __name__ == "__main__":
    main()
