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

The risk-coverage curve shows the whole trade: EM of the answered questions against the share
answered as the threshold moves. The mixed strategy (section 5.1, Table 5) sends the questions
below the threshold to an LLM's parametric knowledge instead.

Everything here reads prediction records as `rerag predict-file` writes them: `confidence`
(calibrated when the RE carries a calibration; `confidence_raw` is always max_j sigmoid(s_j), the
paper's), `reader_answer` (before thresholding), `answers` (gold) and `answerable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from erag.answers import exact_match, token_f1

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
UNANSWERABLE = "unanswerable"


@dataclass
class Classification:
    threshold: float
    precision: float
    recall: float
    f1: float


def max_cosine(question: np.ndarray, passages: np.ndarray) -> float:
    """A retriever's set confidence as the paper takes FiD-KD's (Tables 3, 11, 12): max_j of the
    cosine similarity between the question's embedding and passage j's (L2-normalized rows, e.g.
    `eor.encoder.Encoder`'s, all-MiniLM-L6-v2), clipped to [0, 1] so that the probability thresholds
    apply; 0 for an empty set."""
    return float(np.clip((passages @ question).max(), 0.0, 1.0)) if len(passages) else 0.0


def classify(confidence: Sequence[float], unanswerable: Sequence[bool], threshold: float) -> Classification:
    """Precision, recall and F1 of "unanswerable" (the positive class) predicted as confidence < threshold."""
    predicted = [c < threshold for c in confidence]
    hits = sum(p and u for p, u in zip(predicted, unanswerable))
    precision = hits / max(sum(predicted), 1)
    recall = hits / max(sum(unanswerable), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Classification(threshold, precision, recall, f1)


def search_threshold(
    confidence: Sequence[float], unanswerable: Sequence[bool], thresholds: Sequence[float] = THRESHOLDS
) -> Classification:
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


def all_unanswerable(unanswerable: Sequence[bool]) -> Classification:
    """The baseline that calls every set unanswerable: precision = the share of unanswerable sets,
    recall 1. A classifier is worth its threshold only when its F1 beats this one's."""
    return classify([0.0] * len(unanswerable), unanswerable, 1.0)


def risk_coverage(records: Sequence[dict]) -> list[dict[str, float]]:
    """Answer the questions in order of descending confidence; after each, the share answered
    (coverage), the EM of the reader's answers among them, and the confidence there (answering
    every question with at least that confidence). Equal confidences enter together."""
    ordered = sorted(records, key=lambda r: -r["confidence"])
    points, right = [], 0
    for i, r in enumerate(ordered):
        right += exact_match(r["reader_answer"], r["answers"])
        if i + 1 == len(ordered) or ordered[i + 1]["confidence"] != r["confidence"]:
            points.append({"threshold": r["confidence"], "coverage": (i + 1) / len(ordered), "em": right / (i + 1)})
    return points


def report(dev: Sequence[dict], test: Sequence[dict], thresholds: Sequence[float] = THRESHOLDS) -> dict:
    """The threshold search on dev, Table 3 on test at dev's threshold beside the all-unanswerable
    baseline, Table 4 (accuracy before and after on test) and the risk-coverage points of test."""
    for name, records in (("dev", dev), ("test", test)):
        missing = [r["id"] for r in records if "answerable" not in r]
        if missing:
            raise ValueError(f"{name}: prediction {missing[0]!r} has no gold answers; the report needs them")
    labels = [not r["answerable"] for r in dev]
    confidence = [r["confidence"] for r in dev]
    best = search_threshold(confidence, labels, thresholds)
    test_labels = [not r["answerable"] for r in test]
    kinds = sorted({r.get("confidence_calibration", "uncalibrated") for r in (*dev, *test)})
    return {
        "confidence": kinds[0] if len(kinds) == 1 else kinds,  # set_level, per_context or uncalibrated (sigmoid s)
        "threshold": best.threshold,
        "dev_sweep": {
            "questions": len(dev),
            "unanswerable": sum(labels),
            "thresholds": [asdict(classify(confidence, labels, t)) for t in sorted(thresholds)],
        },
        "table3": {
            "questions": len(test),
            "unanswerable": sum(test_labels),
            "classifier": asdict(classify([r["confidence"] for r in test], test_labels, best.threshold)),
            "all_unanswerable": asdict(all_unanswerable(test_labels)),
        },
        "table4": {name: asdict(a) for name, a in accuracy_by_set(test, best.threshold).items()},
        "risk_coverage": risk_coverage(test),
    }


def markdown(report: dict) -> str:
    """The report's tables: the dev sweep, Table 3 with its baseline, Table 4 and, when present,
    Table 5."""
    t, sweep, t3 = report["threshold"], report["dev_sweep"], report["table3"]
    lines = [
        f"Confidence: {report['confidence']}. Threshold search on dev ({sweep['questions']} questions, "
        f"{sweep['unanswerable']} unanswerable sets):",
        "",
        "| threshold | precision | recall | F1 |",
        "|---|---|---|---|",
    ]
    for c in sweep["thresholds"]:
        mark = " (best)" if c["threshold"] == t else ""
        lines.append(
            f"| {c['threshold']:.1f}{mark} | {100 * c['precision']:.1f} | {100 * c['recall']:.1f} "
            f"| {100 * c['f1']:.1f} |"
        )
    lines += [
        "",
        f"Unanswerable-set classification on test at threshold {t:.1f} (Table 3):",
        "",
        "| classifier | questions | unanswerable | precision | recall | F1 |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in (("confidence < threshold", t3["classifier"]), ("all unanswerable", t3["all_unanswerable"])):
        lines.append(
            f"| {name} | {t3['questions']} | {t3['unanswerable']} | {100 * c['precision']:.1f} "
            f"| {100 * c['recall']:.1f} | {100 * c['f1']:.1f} |"
        )
    lines += [
        "",
        f'Accuracy before -> after answering "{UNANSWERABLE}" below {t:.1f} (Table 4; EM on O, "{UNANSWERABLE}" on X):',
        "",
        "| set | questions | before | after | change |",
        "|---|---|---|---|---|",
    ]
    for name, a in report["table4"].items():
        lines.append(
            f"| {name} | {a['questions']} | {100 * a['before']:.1f} | {100 * a['after']:.1f} "
            f"| {100 * (a['after'] - a['before']):+.1f} |"
        )
    if "table5" in report:
        t5 = report["table5"]
        lines += [
            "",
            f"The mixed strategy at threshold {t:.1f} (Table 5; {t5['questions']} test questions, "
            f"{t5['to_llm']} sent to the LLM):",
            "",
            "| system | EM | F1 |",
            "|---|---|---|",
        ]
        for name in ("rerag", "llm_alone", "mixed"):
            lines.append(f"| {MIXED_NAMES[name]} | {100 * t5[name]['em']:.1f} | {100 * t5[name]['f1']:.1f} |")
    return "\n".join(lines)


MIXED_NAMES = {
    "rerag": "RE-RAG (R-generator)",
    "llm_alone": "LLM alone (P-generator)",
    "mixed": "mixed: LLM below the threshold",
}


def mixed_strategy(test: Sequence[dict], parametric: Sequence[str], threshold: float) -> dict:
    """Table 5: EM and F1 of the reader's answers, of the LLM's closed-book `parametric` answers
    (one per test question), and of the mix that takes the LLM's answer below `threshold`."""
    if len(parametric) != len(test):
        raise ValueError(f"{len(parametric)} parametric answers for {len(test)} test questions")
    systems = {
        "rerag": [r["reader_answer"] for r in test],
        "llm_alone": list(parametric),
        "mixed": [p if r["confidence"] < threshold else r["reader_answer"] for r, p in zip(test, parametric)],
    }
    n = max(len(test), 1)
    out = {"questions": len(test), "to_llm": sum(r["confidence"] < threshold for r in test)}
    for name, answers in systems.items():
        out[name] = {
            "em": sum(exact_match(a, r["answers"]) for a, r in zip(answers, test)) / n,
            "f1": sum(token_f1(a, r["answers"]) for a, r in zip(answers, test)) / n,
        }
    return out


def plot_risk_coverage(path, report: dict) -> None:
    """EM of the answered questions against the share answered, the chosen threshold marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = report["risk_coverage"]
    figure = Figure(figsize=(5.5, 4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.plot([p["coverage"] for p in points], [p["em"] for p in points], label="answer when confidence >= t")
    chosen = [p for p in points if p["threshold"] >= report["threshold"]]
    if chosen:
        axes.plot(
            chosen[-1]["coverage"], chosen[-1]["em"], "o", color="C3", label=f"dev threshold {report['threshold']:.1f}"
        )
    axes.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="coverage (share of test questions answered)",
        ylabel="EM of the answered questions",
        title=f"risk-coverage, confidence: {report['confidence']}",
    )
    axes.grid(alpha=0.3)
    axes.legend(loc="lower left")
    figure.savefig(path, dpi=110)


def unanswerable_files(
    dev: str,
    test: str,
    out: str | None = None,
    fallback_llm: str | None = None,
    thresholds: Sequence[float] = THRESHOLDS,
    batch_size: int = 8,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> str:
    """`report` on `rerag predict-file` outputs (`rerag unanswerable-report`'s arguments), with Table 5
    when `fallback_llm` answers every test question closed-book; written to `out` (unanswerable.json,
    unanswerable.md, risk_coverage.png) when given. Returns the markdown."""
    import json
    from pathlib import Path

    dev_rows, test_rows = (
        [json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()] for f in (dev, test)
    )
    result = report(dev_rows, test_rows, thresholds)
    if fallback_llm:
        from erag.lm import load_lm
        from rerag.infer.loading import default_device
        from rerag.infer.readers import ParametricReader

        llm = ParametricReader(load_lm(fallback_llm, trust_remote_code).to(default_device(device)))
        questions = [r["question"] for r in test_rows]
        answers = [a for i in range(0, len(questions), batch_size) for a in llm(questions[i : i + batch_size])]
        result["table5"] = mixed_strategy(test_rows, answers, result["threshold"]) | {"llm": fallback_llm}
    text = markdown(result)
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "unanswerable.json").write_text(json.dumps(result, indent=2) + "\n")
        (folder / "unanswerable.md").write_text(text + "\n")
        plot_risk_coverage(folder / "risk_coverage.png", result)
    return text
