"""Calibration as a product feature: fit the RE's calibrators on dev, measure them, report them.

The calibrators (`PlattCalibrator`, with temperature scaling as an option, and `IsotonicCalibrator`;
`SetCalibrator` for the question-set use; `Calibration`, the `calibration.json` beside the RE) are
defined in `rerag.models.calibration`, so that `RelevanceEstimator.from_pretrained` can load them. `calibrate` fits both uses on dev (`rerag calibrate`):

- per context: P(context holds an answer | s), fitted on every scored context of dev (`has_answer`);
- per question set: P(the kept top-k holds an answer | c), c = max_j s_j over the RE's top-k of
  the first N contexts (the log-odds of `rerag predict-file`'s confidence), stored with k and N.

Metrics, each with a seeded bootstrap 95% percentile interval (units resampled with replacement;
for the per-context figures the unit is the context, which ignores that a question's contexts
are correlated, so those intervals are somewhat narrow):

- ECE: 15 equal-width bins of the predicted probability on [0, 1] (the last bin closed);
  ECE = sum_b (n_b / n) |mean label_b - mean probability_b|. Sampling noise only adds to each
  bin's gap, so for a well-calibrated set the bootstrap interval may lie above the estimate.
- Brier: mean (probability - label)^2.
- AUROC of the raw confidence for the label (torchmetrics), a property of the RE, not of the
  calibration: a monotone map leaves the ranking alone (isotonic steps can only tie scores).
- AURC: the area under the risk-coverage curve. Answer questions in order of descending
  confidence; after the first i of n, coverage is i / n and risk is 1 - accuracy of those i
  (accuracy = share with label 1); AURC = (1/n) sum_i risk_i. Lower is better; a random order
  scores about 1 - base rate, a perfect one (1 / n) sum_{i > P} (1 - P / i) with P positives.
  Equal confidences keep their input order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

from rerag.defaults import INFER_TOP_K
from rerag.infer.rerank import rerank
from rerag.metrics import auroc
from rerag.models.calibration import Calibration, Calibrator, IsotonicCalibrator, PlattCalibrator, SetCalibrator
from rerag.models.estimator import RelevanceEstimator

N_BINS = 15
METHODS = ("platt", "temperature", "isotonic")
BINS = f"{N_BINS} equal-width bins of the predicted probability on [0, 1]"


def make_calibrator(method: str = "platt") -> Calibrator:
    """An unfitted calibrator: `platt`, `temperature` (Platt with b = 0) or `isotonic`."""
    if method not in METHODS:
        raise ValueError(f"calibration method {method!r}: choose one of {METHODS}")
    return IsotonicCalibrator() if method == "isotonic" else PlattCalibrator(temperature_only=method == "temperature")


def _bin_index(probs: np.ndarray, n_bins: int) -> np.ndarray:
    return np.minimum((probs * n_bins).astype(np.int64), n_bins - 1)


def ece(probs, labels, n_bins: int = N_BINS) -> float:
    """Expected calibration error over `n_bins` equal-width bins (see the module docstring)."""
    p, y = np.asarray(probs, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    gaps = np.bincount(_bin_index(p, n_bins), weights=y - p, minlength=n_bins)  # n_b (mean y_b - mean p_b)
    return float(np.abs(gaps).sum() / len(p))


def brier(probs, labels) -> float:
    """Mean squared difference between probability and 0/1 label."""
    return float(np.mean((np.asarray(probs, dtype=np.float64) - np.asarray(labels, dtype=np.float64)) ** 2))


def aurc(confidence, labels) -> float:
    """Area under the risk-coverage curve (see the module docstring): lower is better."""
    y = np.asarray(labels, dtype=np.float64)[np.argsort(-np.asarray(confidence, dtype=np.float64), kind="stable")]
    return float(np.mean(1.0 - np.cumsum(y) / np.arange(1, len(y) + 1)))


def bootstrap(
    metrics: dict[str, Callable[[np.ndarray], float]], n: int, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, list[float | None]]:
    """Percentile intervals of each `metric(indices)` over `resamples` draws of n indices with
    replacement, the same draws for every metric (so before and after are compared on equal terms)."""
    rng = np.random.default_rng(seed)
    values = {name: [] for name in metrics}
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        for name, metric in metrics.items():
            values[name].append(metric(idx))
    tail = 100 * (1 - level) / 2
    out = {}
    for name, v in values.items():
        v = np.asarray(v, dtype=np.float64)
        v = v[np.isfinite(v)]
        out[name] = [float(np.percentile(v, tail)), float(np.percentile(v, 100 - tail))] if len(v) else [None, None]
    return out


def reliability_bins(probs, labels, n_bins: int = N_BINS) -> list[dict[str, Any]]:
    """Per bin: its edges, how many predictions fall in it, their mean probability and the observed
    frequency of label 1 (None for an empty bin)."""
    p, y = np.asarray(probs, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    idx = _bin_index(p, n_bins)
    count = np.bincount(idx, minlength=n_bins)
    mean_p = np.bincount(idx, weights=p, minlength=n_bins)
    freq = np.bincount(idx, weights=y, minlength=n_bins)
    return [
        {
            "low": b / n_bins,
            "high": (b + 1) / n_bins,
            "count": int(count[b]),
            "mean_probability": float(mean_p[b] / count[b]) if count[b] else None,
            "frequency": float(freq[b] / count[b]) if count[b] else None,
        }
        for b in range(n_bins)
    ]


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def evaluate(labels, before, after, confidence=None, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """ECE and Brier of the probabilities `before` and `after` calibration, AUROC and AURC of the raw
    `confidence` (default: `before`), each with its bootstrap interval (`<key>_ci`), and the bins."""
    y = np.asarray(labels, dtype=np.float64)
    before, after = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    conf = before if confidence is None else np.asarray(confidence, dtype=np.float64)
    metrics = {
        "ece_before": lambda i: ece(before[i], y[i]),
        "ece_after": lambda i: ece(after[i], y[i]),
        "brier_before": lambda i: brier(before[i], y[i]),
        "brier_after": lambda i: brier(after[i], y[i]),
        "auroc": lambda i: auroc(conf[i], y[i]),
        "aurc": lambda i: aurc(conf[i], y[i]),
    }
    everything = np.arange(len(y))
    out: dict[str, Any] = {"n": len(y), "positives": int(y.sum())}
    intervals = bootstrap(metrics, len(y), resamples, seed)
    for name, metric in metrics.items():
        out[name], out[f"{name}_ci"] = _finite(metric(everything)), intervals[name]
    out["reliability_bins"] = {"before": reliability_bins(before, y), "after": reliability_bins(after, y)}
    return out


def plot_reliability(path: str | Path, labels, before, after, title: str) -> Path:
    """A reliability diagram, before and after side by side: observed frequency per bin against
    the bin's mean probability (bars; the diagonal is perfect calibration), bin counts on top."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 4.2), layout="constrained")
    FigureCanvasAgg(figure)
    for panel, (name, probs) in enumerate((("before", before), ("after", after))):
        axes = figure.add_subplot(1, 2, panel + 1)
        bins = [b for b in reliability_bins(probs, labels) if b["count"]]
        axes.bar(
            [b["low"] for b in bins],
            [b["frequency"] for b in bins],
            width=1 / N_BINS,
            align="edge",
            alpha=0.6,
            edgecolor="black",
            label="observed frequency",
        )
        axes.plot(
            [b["mean_probability"] for b in bins],
            [b["frequency"] for b in bins],
            "o",
            color="C1",
            label="at the bin's mean probability",
        )
        for b in bins:
            axes.annotate(str(b["count"]), (b["low"] + 0.5 / N_BINS, 1.01), ha="center", fontsize=6)
        axes.plot([0, 1], [0, 1], "--", color="gray")
        axes.set(
            xlim=(0, 1),
            ylim=(0, 1.06),
            xlabel="predicted probability",
            ylabel="frequency of label 1",
            title=f"{title}, {name}: ECE {ece(probs, labels):.3f}",
        )
        axes.legend(loc="lower right", fontsize=7)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


@dataclass
class Scored:
    """The RE's log-odds on a file: every context (s, has_answer) and, per question, the set-level
    confidence max_j s_j over the top-k with whether the top-k holds an answer."""

    context_scores: np.ndarray
    context_labels: np.ndarray
    set_scores: np.ndarray
    set_labels: np.ndarray
    top_k: int
    depth: int  # N: the longest list scored, after the cut to `depth`


def score_records(
    estimator: RelevanceEstimator, records: Iterable[dict], top_k: int, depth: int | None = None, batch_size: int = 64
) -> Scored:
    """Rerank each record's first `depth` contexts (retriever order; None = all) with the RE, as
    `rerag rerank` does, and collect what the calibrators are fitted on."""
    cs, cy, ss, sy, longest = [], [], [], [], 0
    cut = ({**r, "ctxs": r["ctxs"][:depth]} for r in records)
    for record in rerank(estimator, cut, None, batch_size):
        s, y = [c["re_score"] for c in record["ctxs"]], [bool(c["has_answer"]) for c in record["ctxs"]]
        cs += s
        cy += y
        ss.append(s[0])  # sorted best first: the top-k's max
        sy.append(any(y[:top_k]))
        longest = max(longest, len(s))
    if not ss:
        raise ValueError("no records to calibrate on")
    return Scored(
        np.array(cs), np.array(cy, dtype=np.float64), np.array(ss), np.array(sy, dtype=np.float64), top_k, longest
    )


def _evaluate_both(scored: Scored, calibration: Calibration, resamples: int, seed: int) -> dict[str, Any]:
    set_after = calibration.set_level(scored.set_scores, k=scored.top_k, depth=scored.depth)
    return {
        "set_level": evaluate(scored.set_labels, expit(scored.set_scores), set_after, None, resamples, seed),
        "per_context": evaluate(
            scored.context_labels,
            expit(scored.context_scores),
            calibration.per_context(scored.context_scores),
            None,
            resamples,
            seed,
        ),
    }


def calibrate(
    estimator: RelevanceEstimator,
    dev: Iterable[dict],
    out_dir: str | Path,
    top_k: int = INFER_TOP_K,
    depth: int | None = None,
    method: str = "platt",
    test: Iterable[dict] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
    dev_name: str = "dev",
    test_name: str = "test",
) -> dict[str, Any]:
    """Fit both calibrators on `dev` (validated FiD records with `has_answer`), attach them as
    `estimator.calibration` (save it with `estimator.calibration.save(folder)`), and write to
    `out_dir` the report `calibration_report.json` and reliability diagrams (`reliability_set.png`,
    `reliability_context.png`) on `test` when given (held out), else on dev (in sample).

    The report's top-level metrics are the set-level calibrator's (the confidence that decides
    "unanswerable" and the fallback); `per_context` holds the same keys for P(has answer | s);
    with a test file, `dev` holds the in-sample figures of both."""
    fit = score_records(estimator, dev, top_k, depth, batch_size)
    estimator.calibration = calibration = Calibration(
        make_calibrator(method).fit(
            fit.context_scores,
            fit.context_labels,
            f"{dev_name}: every context of the first {fit.depth}, label has_answer",
        ),
        SetCalibrator(make_calibrator(method), top_k, fit.depth).fit(
            fit.set_scores,
            fit.set_labels,
            f"{dev_name}: max s over the RE's top-{top_k} of the first {fit.depth} "
            "contexts, label: the top-k holds an answer",
        ),
    )
    held_out = score_records(estimator, test, top_k, fit.depth, batch_size) if test is not None else None
    shown = held_out or fit
    figures = _evaluate_both(shown, calibration, resamples, seed)
    report = {
        "level": "set: P(the kept top-k holds an answer | max_j s_j over the top-k); per_context: "
        "P(the context holds an answer | s)",
        "method": method,
        "top_k": top_k,
        "depth": fit.depth,
        "fitted_on": dev_name,
        "evaluated_on": test_name if held_out else f"{dev_name} (in sample)",
        "bins": {"scheme": BINS, "edges": [b / N_BINS for b in range(N_BINS + 1)]},
        "bootstrap": {"resamples": resamples, "seed": seed, "interval": 0.95},
        **figures["set_level"],
        "per_context": figures["per_context"],
        "calibrators": {"per_context": calibration.per_context.fitted_on, "set_level": calibration.set_level.fitted_on},
        "reliability": {"set_level": "reliability_set.png", "per_context": "reliability_context.png"},
    }
    if isinstance(calibration.set_level.calibrator, PlattCalibrator):
        report["calibrators"]["params"] = {
            name: {"a": c.a, "b": c.b}
            for name, c in (("per_context", calibration.per_context), ("set_level", calibration.set_level.calibrator))
        }
    if held_out:
        report["dev"] = _evaluate_both(fit, calibration, resamples, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    where = Path(test_name).name if held_out else f"{Path(dev_name).name} (in sample)"
    set_after = calibration.set_level(shown.set_scores, k=shown.top_k, depth=shown.depth)
    plot_reliability(
        out / "reliability_set.png", shown.set_labels, expit(shown.set_scores), set_after, f"top-{top_k} set, {where}"
    )
    plot_reliability(
        out / "reliability_context.png",
        shown.context_labels,
        expit(shown.context_scores),
        calibration.per_context(shown.context_scores),
        f"context, {where}",
    )
    (out / "calibration_report.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    return report


def calibrate_saved(
    estimator: str,
    dev: str,
    out: str,
    top_k: int = INFER_TOP_K,
    depth: int | None = None,
    method: str = "platt",
    test: str | None = None,
    resamples: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> tuple[dict[str, Any], Path]:
    """`calibrate` on files (`rerag calibrate`'s arguments): the exported RE folder `estimator`, FiD
    files `dev` and `test`; the calibration is saved into the RE's folder, and the serving formats
    beside it are rewritten with it (`rerag.infer.serving.update_serving`). Returns the report and
    the calibration file."""
    from rerag.data.fid_format import read_fid
    from rerag.infer.loading import load_estimator
    from rerag.infer.serving import update_serving

    model = load_estimator(estimator, device, trust_remote_code=trust_remote_code)
    report = calibrate(
        model,
        read_fid(dev),
        out,
        top_k,
        depth,
        method,
        read_fid(test) if test else None,
        resamples,
        seed,
        batch_size,
        dev_name=dev,
        test_name=test or "test",
    )
    saved = model.calibration.save(estimator)
    update_serving(model, estimator)  # the CrossEncoder and the sequence classifier take the calibration
    return report, saved
