"""Whether a table reproduces its paper's finding: the rule every table applies to its own numbers.

Each table's function returns, with its numbers, a `Verdict`: ours in one line and one of

- yes: the paired-bootstrap 95% interval excludes zero in the paper's direction (or a count shows it);
- no: the interval excludes zero in the opposite direction (or the count fails);
- inconclusive: the interval includes zero, whichever way the point estimate falls;
- partly: a finding of several parts whose parts disagree, each part shown;
- not testable here: why (what the world or the machine lacks).

A reason is computed from the run's numbers (the interval, the counts behind it), never a fixed string.
The paper's finding, in one line, is transcribed beside its numbers (`papers.yaml`, `finding`).
REPRODUCTION.md opens with the table of all of them (`rerag.reproduce.document`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

YES, NO, INCONCLUSIVE, PARTLY, UNTESTABLE = "yes", "no", "inconclusive", "partly", "not testable here"
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


def pooled_difference(a: Sequence[Sequence], b: Sequence[Sequence], scale: float = 1.0) -> Difference:
    """The mean of a - b over the items of several seeds' runs (`a[s]`, `b[s]`: seed s's paired
    per-item values), with the 95% percentile interval of the items resampled within each seed
    (a stratified bootstrap: each resample keeps every seed's count). One seed: `paired_difference`."""
    if len(a) != len(b) or not a:
        raise ValueError(f"pooling needs as many seeds on both sides, at least one; got {len(a)} and {len(b)}")
    if len(a) == 1:
        return paired_difference(a[0], b[0], scale=scale)
    diffs = [np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64) for x, y in zip(a, b)]
    rng = np.random.default_rng(SEED)
    means = np.empty(RESAMPLES)
    for i in range(RESAMPLES):
        means[i] = np.concatenate([d[rng.integers(0, len(d), len(d))] for d in diffs]).mean()
    low, high = np.percentile(means, [2.5, 97.5])
    return Difference(scale * float(np.concatenate(diffs).mean()), scale * float(low), scale * float(high))


def by_direction(ours: str, difference: Difference, expected: int = 1, because: str = "") -> Verdict:
    """The verdict of a difference whose sign the paper predicts (`expected` +1 or -1): yes or no when
    the interval excludes zero on one side, inconclusive when it holds zero. The reason names the
    interval's side; `because` (a line computed from the run's numbers) is added to it."""
    line = f"{ours}: {difference}"
    paper_side = "above" if expected > 0 else "below"
    other_side = "below" if expected > 0 else "above"
    if difference.low > 0 or difference.high < 0:
        side = "above" if difference.low > 0 else "below"
        reproduced = YES if side == paper_side else NO
        why = f"the interval lies {side} 0" + ("" if reproduced == YES else ", against the paper")
    elif difference.value == difference.low == difference.high == 0:
        reproduced, why = INCONCLUSIVE, "no difference on any question"
    else:
        reproduced = INCONCLUSIVE
        leaning = (
            "at 0" if difference.value == 0 else f"{paper_side if expected * difference.value > 0 else other_side} 0"
        )
        why = f"the interval [{difference.low:+.3g}, {difference.high:+.3g}] holds 0 (the estimate {leaning})"
    return Verdict(line, reproduced, f"{why}; {because}" if because else why)


def combined(*verdicts: Verdict) -> Verdict:
    """A finding of several parts: the parts' verdict where they agree, else partly, each part shown
    with its own verdict and reason. Parts not testable here are left out while another part is."""
    tested = [v for v in verdicts if v.reproduced != UNTESTABLE] or list(verdicts)
    ours = "; ".join(v.ours for v in verdicts)
    kinds = {v.reproduced for v in tested}
    if len(kinds) == 1:
        return Verdict(ours, kinds.pop(), "; ".join(v.why for v in tested if v.why))
    parts = "; ".join(f"{v.ours.split(':', 1)[0]}: {v.reproduced} ({v.why})" for v in tested)
    return Verdict(ours, PARTLY, parts)


def holds(ours: str, held: bool, why: str) -> Verdict:
    """A finding checked by a count or a single measurement: yes when it holds, else no; `why` is the
    count or measurement that decided it, computed from the run's numbers."""
    return Verdict(ours, YES if held else NO, why)


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
