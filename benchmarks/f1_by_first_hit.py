"""Where RE-RAG's F1 against the retriever's order is won and lost, when the generator reads the top 1.

For each test run (`test_results.jsonl`, written by `rerag.callbacks.MetricsWriter` with
`test_top_k: 1`) splits the questions by whether the RE's first passage holds an answer string and
whether the retriever's first does (`first_hit`'s `has_answer` rank 1), and gives per cell the
questions, the mean token F1 of the answer read from each order's first passage, and the cell's
share of the difference in mean F1 over all questions. The gain an RE can make is the cell where
only its first passage holds the answer, times how much better the generator answers from such a
passage: a generator that answers poorly even from the right passage caps it. The mean length of
the answers, in words, is the last column.

    python benchmarks/f1_by_first_hit.py --runs outputs/squad_smollm2_teacher/test_results.jsonl
"""

from __future__ import annotations

import argparse

import numpy as np

from rerag.infer.compare import RETRIEVER_FIELDS, load_results

CELLS = {  # (the RE's first passage holds an answer, the retriever's first does) -> label
    (True, True): "both",
    (True, False): "RE only",
    (False, True): "retriever only",
    (False, False): "neither",
}


def f1_by_first_hit(results: list[dict]) -> dict[str, dict[str, float]]:
    """Per cell of `CELLS` and over all questions: `questions`, `F1 RE` and `F1 retriever` (means
    over the cell), `share` (the cell's part of the mean F1 difference over every question) and
    `words` (mean words of the RE order's and the retriever order's answers, "RE / retriever")."""
    if not results:
        raise ValueError("no result rows")
    n = len(results)
    cells = {
        label: [
            r
            for r in results
            if (r["first_hit"]["re"]["has_answer"] == 1, r["first_hit"]["retriever"]["has_answer"] == 1) == key
        ]
        for key, label in CELLS.items()
    }
    cells["all"] = results
    table = {}
    for label, rows in cells.items():
        f1 = np.array([r["f1"] for r in rows], dtype=np.float64)
        f1_retriever = np.array([r["f1_retriever_order"] for r in rows], dtype=np.float64)
        words = [
            np.mean([len(r[a].split()) for r in rows]) if rows else np.nan for a in ("answer", "answer_retriever_order")
        ]
        table[label] = {
            "questions": len(rows),
            "F1 RE": float(f1.mean()) if rows else np.nan,
            "F1 retriever": float(f1_retriever.mean()) if rows else np.nan,
            "share": float((f1 - f1_retriever).sum() / n),
            "words": f"{words[0]:.1f} / {words[1]:.1f}",
        }
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", required=True, help="test_results.jsonl files")
    args = parser.parse_args()
    fields = (*RETRIEVER_FIELDS, "answer", "answer_retriever_order")
    print(
        "| run | first passage holds an answer | questions | F1, RE's top 1 | F1, retriever's top 1 | share of the F1 difference | answer words (RE / retriever) |"
    )
    print("|---|---|---|---|---|---|---|")
    for run in args.runs:
        table = f1_by_first_hit(list(load_results(run, fields=fields).values()))  # a bad row names its file and line
        for label, row in table.items():
            print(
                f"| {run} | {label} | {row['questions']} | {row['F1 RE']:.3f} | {row['F1 retriever']:.3f} | "
                f"{row['share']:+.3f} | {row['words']} |"
            )


if __name__ == "__main__":
    main()
