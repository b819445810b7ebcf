"""Downstream metrics E_M of eq. 1 (§2): score one reader output against the gold outputs.

A metric maps ``(prediction, references)`` to a value in [0, 1], the best over the references.
EM and F1 are the project's one definition in ``erag.answers``.
The paper uses EM for NQ, TriviaQA and HotpotQA, accuracy for FEVER and F1 for WoW (§3.1); any
callable with the same signature serves as well.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence, Union

from rouge_score import rouge_scorer

from .answers import exact_match, normalize_answer, token_f1

DownstreamMetric = Callable[[str, Sequence[str]], float]


def accuracy(prediction: str, references: Sequence[str]) -> float:
    """1.0 when a normalized reference occurs in the normalized prediction as whole tokens."""
    padded = f" {normalize_answer(prediction)} "
    return float(
        any(f" {ref} " in padded for ref in map(normalize_answer, references) if ref)
    )


@functools.lru_cache(maxsize=1)
def _rouge_l_scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rougeL"])


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure (rouge-score package) against the best reference."""
    scorer = _rouge_l_scorer()
    return max((scorer.score(ref, prediction)["rougeL"].fmeasure for ref in references), default=0.0)


DOWNSTREAM_METRICS: dict[str, DownstreamMetric] = {
    "em": exact_match,
    "f1": token_f1,
    "accuracy": accuracy,
    "rougeL": rouge_l,
}


def get_downstream_metric(metric: Union[str, DownstreamMetric]) -> DownstreamMetric:
    """Return the metric named ``metric`` (one of ``DOWNSTREAM_METRICS``), or ``metric`` if callable."""
    if callable(metric):
        return metric
    if metric not in DOWNSTREAM_METRICS:
        raise ValueError(
            f"unknown downstream metric {metric!r}: use one of {sorted(DOWNSTREAM_METRICS)} "
            "or a callable (prediction: str, references: list[str]) -> float in [0, 1]"
        )
    return DOWNSTREAM_METRICS[metric]
