"""Does a trained RE's score follow passage length on evaluation passages, and does scoring a
passage by its best 60-word window (MaxP: the length training showed the RE) rank better?

Training cuts every context to `data.init_args.train_context_words` words; dev and test passages are
whole. Per question (the first --n of --file, BM25's top --k), this prints the mean Spearman
correlation of the RE's score s with the passage's word count, and gold Recall@1 of: the RE over
whole passages, the RE's best window per passage (windows of --words words, stride --words/2), the
longest passage, and BM25's order.

    python benchmarks/re_length_response.py --checkpoints outputs/squad_smollm2_teacher/checkpoints/best.ckpt
"""

import argparse

import torch
from scipy.stats import spearmanr

from rerag.data.fid_format import read_fid
from rerag.infer.loading import load_models


def response(checkpoint: str, records: list[dict], k: int, words: int) -> dict[str, float]:
    estimator, _ = load_models(checkpoint=checkpoint)
    estimator.eval()
    rho, hits = [], {"RE, whole passages": 0, "RE, best window": 0, "longest passage": 0, "BM25": 0}
    with torch.no_grad():
        for r in records:
            ctxs = r["ctxs"][:k]
            gold = [bool(c.get("gold")) for c in ctxs]
            lengths = [len(c["text"].split()) for c in ctxs]
            estimator.context_words = None  # whole passages
            s = estimator.score(r["question"], ctxs, 32).float()
            estimator.context_words = words
            best = estimator.score(r["question"], ctxs, 32).float().tolist()
            rho.append(spearmanr(s.tolist(), lengths).statistic)
            hits["RE, whole passages"] += gold[int(s.argmax())]
            hits["RE, best window"] += gold[max(range(k), key=best.__getitem__)]
            hits["longest passage"] += gold[max(range(k), key=lengths.__getitem__)]
            hits["BM25"] += gold[0]
    return {"Spearman(s, words)": sum(rho) / len(rho)} | {f"R@1 {name}": n / len(records) for name, n in hits.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoints", nargs="+", required=True, help="`rerag fit` checkpoints")
    p.add_argument("--file", default="data/squad/dev.jsonl")
    p.add_argument("--n", type=int, default=40, help="the first n questions (the configs validate on 40)")
    p.add_argument("--k", type=int, default=20, help="BM25's top k")
    p.add_argument("--words", type=int, default=60, help="window words, as data.init_args.train_context_words")
    args = p.parse_args()
    records = list(read_fid(args.file))[: args.n]
    rows = {c: response(c, records, args.k, args.words) for c in args.checkpoints}
    columns = list(next(iter(rows.values())))
    print(f"\n{args.file}, first {len(records)} questions, BM25's top {args.k}\n")
    print("| checkpoint | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for c, row in rows.items():
        print(f"| {c} | " + " | ".join(f"{row[col]:.3f}" for col in columns) + " |")


if __name__ == "__main__":
    main()
