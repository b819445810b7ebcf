"""Compare runs on the same test questions, with paired-bootstrap intervals.

Input: the per-question JSONL that `MetricsWriter(results=...)` writes at the end of `rerag test`,
one file per run (e.g. the untrained models, then the trained ones). Each run gives one system:
the RE's order and RE-RAG's answers; `retriever` adds the retriever's order with the named run's
generator reading the retriever's top-k (its `answer_retriever_order`). A rival's rows (`rerag
score-rival`: UPR, a dense encoder) rank the same passages without answering: they give Recall@k only.

Every figure is a mean over questions: Recall@k by `gold` and by `has_answer` (the first relevant
rank <= k), EM and token F1. Each comes with a 95% percentile bootstrap interval (questions
resampled with replacement, `scipy.stats.bootstrap`), and each difference between the `against`
system and another with a paired interval: the per-question differences are resampled, so both
systems are scored on the same draw of questions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import bootstrap

from rerag.metrics import hits_at_k

RETRIEVER = "retriever"
FIELDS = ("first_hit",)  # what every run's rows need; EM and F1 where a run reads (a rival only ranks)
RETRIEVER_FIELDS = (*FIELDS, "em_retriever_order", "f1_retriever_order")  # and the run named by `retriever`


def load_results(path: str | Path, fields: tuple[str, ...] = FIELDS) -> dict[str, dict]:
    """Per-question rows of one run, by question id; a clear error on a line that is not one or
    lacks one of `fields`."""
    rows = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows[row["id"]] = row
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: line {n}: not a result row with an 'id' ({err})") from None
        missing = [f for f in fields if f not in row]
        if missing:
            raise ValueError(f"{path}: line {n}: no field {missing[0]!r} (a result row of another rerag version?)")
    if not rows:
        raise ValueError(f"{path}: no result rows")
    return rows


def figures(rows: list[dict], order: str, answer: str, ks: list[int]) -> dict[str, np.ndarray]:
    """Per-question values of each figure of one system: `order` ("re" or "retriever") picks the
    ranking, `answer` ("answer" or "answer_retriever_order") the answer scored."""
    out = {}
    for relevant in ("gold", "has_answer"):
        if all(relevant in r["first_hit"][order] for r in rows):
            ranks = [r["first_hit"][order][relevant] for r in rows]
            for k in ks:
                out[f"{relevant} R@{k}"] = hits_at_k(ranks, k)
    suffix = "_retriever_order" if answer == "answer_retriever_order" else ""
    if all(f"em{suffix}" in r for r in rows):  # a rival's rows (`rerag score-rival`) rank without answering
        out["EM"] = np.array([r[f"em{suffix}"] for r in rows], dtype=np.float64)
        out["F1"] = np.array([r[f"f1{suffix}"] for r in rows], dtype=np.float64)
    return out


def interval(values: np.ndarray, resamples: int, seed: int) -> list[float]:
    """The 95% percentile bootstrap interval of the mean of `values`."""
    if np.all(values == values[0]):  # no spread: every resample has the same mean
        return [float(values[0])] * 2
    ci = bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        method="percentile",
        vectorized=True,
        random_state=np.random.default_rng(seed),
    ).confidence_interval
    return [float(ci.low), float(ci.high)]


def compare(
    runs: dict[str, str | Path],
    retriever: str | None = None,
    against: str | None = None,
    ks: list[int] = [1, 5],
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Figures of every system with intervals, and `against` minus each other system with paired
    intervals (default `against`: the last run). Runs must hold the same questions."""
    loaded = {
        name: load_results(path, RETRIEVER_FIELDS if name == retriever else FIELDS) for name, path in runs.items()
    }
    ids = sorted(next(iter(loaded.values())))
    for name, rows in loaded.items():
        if sorted(rows) != ids:
            raise ValueError(
                f"run {name!r} ({runs[name]}): holds other questions than run {next(iter(runs))!r}; "
                "compare runs tested on the same split and limits"
            )
    systems = {name: figures([rows[i] for i in ids], "re", "answer", ks) for name, rows in loaded.items()}
    if retriever is not None:
        if retriever not in loaded:
            raise ValueError(f"retriever={retriever!r} names no run (runs: {sorted(loaded)})")
        systems[RETRIEVER] = figures([loaded[retriever][i] for i in ids], "retriever", "answer_retriever_order", ks)
    against = against or list(runs)[-1]
    report: dict[str, Any] = {
        "questions": len(ids),
        "runs": {k: str(v) for k, v in runs.items()},
        "retriever_answers_from": retriever,
        "against": against,
        "bootstrap": {"resamples": resamples, "seed": seed, "interval": 0.95},
        "systems": {},
        "differences": {},
    }
    for name, values in systems.items():
        report["systems"][name] = {
            f: {"value": float(v.mean()), "ci": interval(v, resamples, seed)} for f, v in values.items()
        }
    for name, values in systems.items():
        if name == against:
            continue
        shared = [f for f in values if f in systems[against]]
        report["differences"][f"{against} - {name}"] = {
            f: {
                "value": float((systems[against][f] - values[f]).mean()),
                "ci": interval(systems[against][f] - values[f], resamples, seed),
            }
            for f in shared
        }
    return report


def markdown(report: dict[str, Any]) -> str:
    """The report as two Markdown tables: figures, then paired differences."""

    def cell(x: dict) -> str:
        return f"{x['value']:.3f} [{x['ci'][0]:.3f}, {x['ci'][1]:.3f}]"

    def table(title: str, rows: dict[str, dict]) -> list[str]:
        columns = list(dict.fromkeys(f for r in rows.values() for f in r))
        lines = [f"| {title} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        lines += [
            f"| {name} | " + " | ".join(cell(r[c]) if c in r else "" for c in columns) + " |"
            for name, r in rows.items()
        ]
        return lines

    return (
        "\n".join(
            [
                f"{report['questions']} questions; 95% bootstrap intervals ({report['bootstrap']['resamples']} "
                "resamples; differences paired by question)",
                "",
                *table("system", report["systems"]),
                "",
                *table("difference", report["differences"]),
            ]
        )
        + "\n"
    )
