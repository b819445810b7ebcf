"""Whether a table reproduces its paper's finding: the rule every table applies to its own numbers.

Each table's function returns, with its numbers, a `Verdict`: ours in one line and one of

- yes: the paper's direction, with a paired-bootstrap 95% interval that excludes the opposite;
- partly: the paper's direction, but the interval includes no difference;
- no: the opposite direction, with its measured reason;
- not testable here: why (what the world or the machine lacks).

The paper's finding, in one line, is transcribed beside its numbers (`papers.yaml`, `finding`).
REPRODUCTION.md opens with the table of all of them (`rerag.reproduce.document`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

YES, PARTLY, NO, UNTESTABLE = "yes", "partly", "no", "not testable here"
_STRENGTH = {YES: 3, PARTLY: 2, NO: 1, UNTESTABLE: 0}
RESAMPLES, SEED = 2000, 0


@dataclass
class Verdict:
    """Ours in one line, and `reproduced` (yes, partly, no or not testable here) with its reason."""

    ours: str
    reproduced: str
    why: str = ""


@dataclass
class Difference:
    """A paired difference (a minus b) with its 95% bootstrap interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:+.3g} [{self.low:+.3g}, {self.high:+.3g}]"


def paired_difference(
    a: Sequence, b: Sequence, statistic: Callable[..., float] | None = None, scale: float = 1.0
) -> Difference:
    """statistic(a) - statistic(b) over the same items, with the 95% percentile interval of the
    questions resampled together (`scipy.stats.bootstrap`, paired). Default statistic: the mean
    (then the difference of per-question values). `a` and `b` may be arrays of rows (e.g. a
    prediction and a label per question) for a statistic such as F1. `scale` multiplies the result
    (100 for percentages)."""
    from scipy.stats import bootstrap

    from rerag.infer.compare import interval

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) != len(b) or not len(a):
        raise ValueError(f"a paired difference needs two equal, non-empty samples; got {len(a)} and {len(b)}")
    if statistic is None:  # the interval of the mean per-question difference, as `rerag compare` gives it
        diff = a - b
        low, high = interval(diff, RESAMPLES, SEED)
        return Difference(scale * float(diff.mean()), scale * low, scale * high)
    value = statistic(a) - statistic(b)
    ci = bootstrap(
        (np.arange(len(a)),),
        lambda i: statistic(a[i]) - statistic(b[i]),
        n_resamples=RESAMPLES,
        method="percentile",
        vectorized=False,
        random_state=np.random.default_rng(SEED),
    ).confidence_interval
    low, high = (float(ci.low), float(ci.high)) if np.isfinite([ci.low, ci.high]).all() else (value, value)
    return Difference(scale * value, scale * low, scale * high)


def by_direction(ours: str, difference: Difference, expected: int = 1, opposite_because: str = "") -> Verdict:
    """The verdict of a difference whose sign the paper predicts (`expected` +1 or -1)."""
    toward = expected * difference.value
    excludes_zero = difference.low > 0 if expected > 0 else difference.high < 0
    line = f"{ours}: {difference}"
    if difference.value == 0 == difference.low == difference.high:
        return Verdict(line, NO, "no difference on any question")
    if toward == 0:  # neither the paper's direction nor the opposite one
        return Verdict(line, NO, "no difference: the point estimate is 0 and the interval includes both directions")
    if toward > 0:
        return Verdict(line, YES if excludes_zero else PARTLY, "" if excludes_zero else "the interval includes 0")
    return Verdict(line, NO, opposite_because or "the opposite direction")


def weakest(*verdicts: Verdict) -> Verdict:
    """A finding with several parts holds as far as its weakest part does; ours lists every part."""
    worst = min(verdicts, key=lambda v: _STRENGTH[v.reproduced])
    return Verdict("; ".join(v.ours for v in verdicts), worst.reproduced, "; ".join(v.why for v in verdicts if v.why))


def holds(ours: str, held: bool, why_not: str) -> Verdict:
    """A finding checked by a count or a single measurement: yes when it holds, else no and why."""
    return Verdict(ours, YES, "") if held else Verdict(ours, NO, why_not)


def untestable(ours: str, why: str) -> Verdict:
    return Verdict(ours, UNTESTABLE, why)


def f1_of_rows(rows: np.ndarray) -> float:
    """F1 of the positive class from rows of (predicted, label), both 0/1."""
    predicted, label = rows[:, 0] > 0.5, rows[:, 1] > 0.5
    tp = float((predicted & label).sum())
    return 2 * tp / max(float(predicted.sum() + label.sum()), 1.0)


def kendall_tau_of_rows(rows: np.ndarray) -> float:
    """Kendall's tau between the two columns of `rows` (0 where undefined, e.g. a constant column)."""
    from scipy.stats import kendalltau

    tau = kendalltau(rows[:, 0], rows[:, 1]).statistic
    return float(tau) if np.isfinite(tau) else 0.0
