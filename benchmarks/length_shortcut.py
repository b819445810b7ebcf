"""How often is the gold passage the longest of BM25's top k in training, with whole passages and
with the training windows (`data.init_args.train_context_words`)? How often is it shorter than the
window, against all top-k contexts (a window caps length but leaves short passages short), and how
often does the gold passage's window still hold an answer string? Counts over the questions whose top
k holds a gold passage, with the windows training draws (`rerag.data.datamodule.word_window`, seeded
as in training); "skip short" takes the first k contexts of at least the window's words
(`data.init_args.skip_short_train_contexts`), so every window has one length; "keep answer" places a
passage's window where it still holds an answer string (`data.init_args.train_windows_keep_answer`).

    rerag make-squad --input squad2_dev_5articles.json --out data/squad
    python benchmarks/length_shortcut.py --file data/squad/train.jsonl --words 40 50 60 70
    python benchmarks/length_shortcut.py --file data/squad/dev.jsonl --k 20 --words 60
"""

import argparse
import random

from erag.answers import has_answer
from rerag.data.datamodule import long_contexts, word_window
from rerag.data.fid_format import read_fid


def counts(
    records: list[dict], k: int, words: int | None, seed: int, skip_short: bool = False, keep_answer: bool = False
) -> dict[str, float]:
    """The questions counted, and the shares the table prints."""
    n = longest = kept = gold_short = 0
    short = total = 0
    for r in records:
        top = (long_contexts(r, words)["ctxs"] if skip_short else r["ctxs"])[:k]
        gold = [bool(c.get("gold")) for c in top]
        if not any(gold):
            continue
        g = gold.index(True)
        if words:
            short += sum(len(c["text"].split()) < words for c in top)
            total += len(top)
            gold_short += len(top[g]["text"].split()) < words
            answers = r["answers"] if keep_answer else ()
            top = [word_window(c, words, random.Random(f"{seed}:{r['id']}:{c['id']}"), answers) for c in top]
        lengths = [len(c["text"].split()) for c in top]
        n += 1
        longest += lengths[g] == max(lengths) and lengths.count(max(lengths)) == 1
        kept += has_answer(top[g]["text"], r["answers"])
    return {
        "questions": n,
        "longest": longest / n,
        "gold_short": gold_short / n,
        "short": short / total if total else 0.0,
        "kept": kept / n,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", default="data/squad/train.jsonl")
    p.add_argument("--k", type=int, default=4, help="BM25's top k, as data.init_args.n_train_contexts")
    p.add_argument("--words", type=int, nargs="*", default=[40, 50, 60, 70])
    p.add_argument("--seed", type=int, default=0, help="data.init_args.seed")
    args = p.parse_args()
    records = list(read_fid(args.file))
    print(
        f"\n{args.file}, BM25's top {args.k}\n\n| windows | questions | gold strictly longest | gold shorter than "
        "the window | contexts shorter than the window | gold window holds an answer |"
    )
    print("|---|---|---|---|---|---|")
    settings = [(None, "")] + [(w, mode) for w in args.words for mode in ("", "skip short", "keep answer")]
    for words, mode in settings:
        c = counts(records, args.k, words, args.seed, mode == "skip short", mode == "keep answer")
        name = f"{words}{', ' + mode if mode else ''}" if words else "whole passages"
        short = f"{c['gold_short']:.3f} | {c['short']:.3f}" if words else "- | -"
        print(f"| {name} | {c['questions']} | {c['longest']:.3f} | {short} | {c['kept']:.3f} |")


if __name__ == "__main__":
    main()
