"""Does a trained RE's score follow passage length on evaluation passages, and which way of scoring
a passage from its windows ranks best?

Training cuts every context to `data.init_args.train_context_words` words. Per question (the first
--n of each --files, BM25's top --k), the RE scores every passage whole and every window of --words
words (stride --words/2, `rerag.inputs.window_rows`) in one pass; this prints the mean Spearman
correlation of the whole-passage s with the passage's word count, and gold Recall@1 of each rule:
whole passages, the best window (MaxP, `eval_context_words`), the better of the whole passage and
its best window, the mean window, and the best window only where the list mixes passages shorter and
longer than a window (whole otherwise); with the longest passage and BM25's order. "windows, first pick /
gold" compares the mean window count of the best-window rule's first pick and of the gold passage:
a maximum over more windows is higher by chance alone, so a ratio well above 1 says passages cut into
more windows win for their count.

    python benchmarks/re_length_response.py --checkpoints outputs/squad_smollm2_teacher/checkpoints/best.ckpt \\
        --files data/squad/dev.jsonl data/squad_sentences_dev/test.jsonl
"""

import argparse

import torch
from scipy.stats import spearmanr

from rerag.data.fid_format import read_fid
from rerag.infer.loading import load_models
from rerag.inputs import window_rows
from rerag.models.estimator import pool_windows


def rules(whole: torch.Tensor, windows: torch.Tensor, window_of: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each passage's score under each rule, from its whole-passage s and its windows' s."""
    k = len(whole)
    best = pool_windows(windows, window_of, k)
    return {
        "whole": whole,
        "best window": best,
        "whole or best window": torch.maximum(whole, best),
        "mean window": pool_windows(windows, window_of, k, "mean"),
    }


def response(checkpoint: str, records: list[dict], k: int, words: int) -> dict[str, float]:
    estimator, _ = load_models(checkpoint=checkpoint)
    estimator.eval()
    estimator.context_words = None  # each row below is scored as given
    rho, hits, counts = [], {}, [0.0, 0.0]
    with torch.no_grad():
        for r in records:
            ctxs = r["ctxs"][:k]
            gold = [bool(c.get("gold")) for c in ctxs]
            lengths = [len(c["text"].split()) for c in ctxs]
            windows, window_of = window_rows(ctxs, words)
            window_s = estimator.score(r["question"], windows, 32).float()
            window_of = torch.tensor(window_of)
            n_windows = torch.bincount(window_of, minlength=k)
            # a passage no longer than a window is its one window: only longer ones are scored again whole
            whole = pool_windows(window_s, window_of, k)
            longer = [j for j in range(k) if n_windows[j] > 1]
            if longer:
                whole[longer] = estimator.score(r["question"], [ctxs[j] for j in longer], 32).float()
            rho.append(spearmanr(whole.tolist(), lengths).statistic)
            picks = {f"RE, {name}": int(s.argmax()) for name, s in rules(whole, window_s, window_of).items()}
            # best window only where the list mixes passages shorter and longer than a window
            mixed = min(lengths) < words < max(lengths)
            picks["RE, best window if lengths mix"] = picks["RE, best window" if mixed else "RE, whole"]
            picks |= {"longest passage": max(range(k), key=lengths.__getitem__), "BM25": 0}
            for name, j in picks.items():
                hits[name] = hits.get(name, 0) + gold[j]
            if any(gold):
                counts[0] += float(n_windows[picks["RE, best window"]])
                counts[1] += float(n_windows[gold.index(True)])
    return (
        {"Spearman(s, words)": sum(rho) / len(rho)}
        | {f"R@1 {name}": n / len(records) for name, n in hits.items()}
        | {"windows, first pick / gold": counts[0] / max(counts[1], 1.0)}
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoints", nargs="+", required=True, help="`rerag fit` checkpoints")
    p.add_argument("--files", nargs="+", default=["data/squad/dev.jsonl"], help="FiD files (dev sets)")
    p.add_argument("--n", type=int, default=40, help="the first n questions (the configs validate on 40)")
    p.add_argument("--k", type=int, default=20, help="BM25's top k")
    p.add_argument("--words", type=int, default=60, help="window words, as data.init_args.eval_context_words")
    args = p.parse_args()
    for path in args.files:
        records = list(read_fid(path))[: args.n]
        rows = {c: response(c, records, args.k, args.words) for c in args.checkpoints}
        columns = list(next(iter(rows.values())))
        print(f"\n{path}, first {len(records)} questions, BM25's top {args.k}, windows of {args.words} words\n")
        print("| checkpoint | " + " | ".join(columns) + " |")
        print("|---" * (len(columns) + 1) + "|")
        for c, row in rows.items():
            print(f"| {c} | " + " | ".join(f"{row[col]:.3f}" for col in columns) + " |")


if __name__ == "__main__":
    main()
