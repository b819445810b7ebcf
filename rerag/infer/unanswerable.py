"""The "unanswerable" classifier and what answering "unanswerable" costs (sections 4.2 and 5.1,
Tables 3 and 4).

A question's kept context set (the RE's top-k) is *unanswerable* when none of its contexts holds a
gold answer (`has_answer`). Confidence is max_j RE_ij over the kept set, RE = sigmoid(s) (eq. 3)
or its per-context calibration (`rerag.infer.predict`);
the classifier says "unanswerable" when confidence < threshold, the threshold being the one of
0.5, 0.6, ..., 0.9 with the best F1 on dev (the paper's search). Accuracy is split into the
answerable set (O) and the unanswerable set (X), before and after thresholding (Table 4): on O it
is exact match with the gold answers; on X it is classification accuracy, an output is right only
when it is "unanswerable", since no kept context supports any answer the reader gives (one that
matches a gold answer anyway is a guess, not a reading).

Everything here reads prediction records as `rerag predict-file` writes them: `confidence`,
`reader_answer` (before thresholding), `answers` (gold) and `answerable`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from erag.answers import exact_match

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
UNANSWERABLE = "unanswerable"


@dataclass
class Classification:
    threshold: float
    precision: float
    recall: float
    f1: float


def classify(confidence: Sequence[float], unanswerable: Sequence[bool], threshold: float) -> Classification:
    """Precision, recall and F1 of "unanswerable" (the positive class) predicted as confidence < threshold."""
    predicted = [c < threshold for c in confidence]
    hits = sum(p and u for p, u in zip(predicted, unanswerable))
    precision = hits / max(sum(predicted), 1)
    recall = hits / max(sum(unanswerable), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Classification(threshold, precision, recall, f1)


def search_threshold(confidence: Sequence[float], unanswerable: Sequence[bool],
                     thresholds: Sequence[float] = THRESHOLDS) -> Classification:
    """The threshold with the best F1, the lowest one on ties (it abstains least)."""
    results = [classify(confidence, unanswerable, t) for t in sorted(thresholds)]
    return max(results, key=lambda c: c.f1)  # max keeps the first of equal F1s


@dataclass
class Accuracy:
    questions: int
    before: float  # accuracy (`is_right`) of the reader's answers
    after: float  # accuracy after answering "unanswerable" below the threshold


def is_right(output: str, record: dict) -> bool:
    """Table 4's rule: on an answerable set, EM with the gold answers; on an unanswerable one,
    only "unanswerable" is right."""
    return exact_match(output, record["answers"] if record["answerable"] else [UNANSWERABLE])


def accuracy_by_set(records: Sequence[dict], threshold: float) -> dict[str, Accuracy]:
    """Accuracy on the answerable (O) and unanswerable (X) sets before and after thresholding
    (Table 4): EM on O; on X, whether the output is "unanswerable"."""
    out = {}
    for name, answerable in (("answerable (O)", True), ("unanswerable (X)", False)):
        subset = [r for r in records if r["answerable"] == answerable]
        before = [is_right(r["reader_answer"], r) for r in subset]
        after = [is_right(UNANSWERABLE if r["confidence"] < threshold else r["reader_answer"], r) for r in subset]
        n = max(len(subset), 1)
        out[name] = Accuracy(len(subset), sum(before) / n, sum(after) / n)
    return out


def report(dev: Sequence[dict], test: Sequence[dict], thresholds: Sequence[float] = THRESHOLDS) -> str:
    """Markdown tables: the dev threshold sweep, Table 3 (classification on test at the dev
    threshold) and Table 4 (EM before -> after on test)."""
    for name, records in (("dev", dev), ("test", test)):
        missing = [r["id"] for r in records if "answerable" not in r]
        if missing:
            raise ValueError(f"{name}: prediction {missing[0]!r} has no gold answers; the report needs them")
    labels = [not r["answerable"] for r in dev]
    confidence = [r["confidence"] for r in dev]
    best = search_threshold(confidence, labels, thresholds)
    lines = [f"Threshold search on dev ({len(dev)} questions, {sum(labels)} unanswerable sets):", "",
             "| threshold | precision | recall | F1 |", "|---|---|---|---|"]
    for t in sorted(thresholds):
        c = classify(confidence, labels, t)
        mark = " (best)" if t == best.threshold else ""
        lines.append(f"| {t:.1f}{mark} | {100 * c.precision:.1f} | {100 * c.recall:.1f} | {100 * c.f1:.1f} |")
    t = best.threshold
    c = classify([r["confidence"] for r in test], [not r["answerable"] for r in test], t)
    lines += ["", f"Unanswerable-set classification on test at threshold {t:.1f} (Table 3):", "",
              "| questions | unanswerable | precision | recall | F1 |", "|---|---|---|---|---|",
              f"| {len(test)} | {sum(not r['answerable'] for r in test)} | {100 * c.precision:.1f} "
              f"| {100 * c.recall:.1f} | {100 * c.f1:.1f} |",
              "", f"Accuracy before -> after answering \"{UNANSWERABLE}\" below {t:.1f} (Table 4; EM on O, "
              f"\"{UNANSWERABLE}\" on X):", "",
              "| set | questions | before | after | change |", "|---|---|---|---|---|"]
    for name, a in accuracy_by_set(test, t).items():
        lines.append(f"| {name} | {a.questions} | {100 * a.before:.1f} | {100 * a.after:.1f} "
                     f"| {100 * (a.after - a.before):+.1f} |")
    return "\n".join(lines)
