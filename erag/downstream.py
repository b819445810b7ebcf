"""Downstream metrics E_M of eq. 1 (§2): score one reader output against the gold outputs.

A metric maps ``(prediction, references)`` to a value in [0, 1], the best over the references.
EM and F1 are the project's one definition in ``erag.answers``.
The paper uses the metrics KILT recommends: EM for NQ, TriviaQA and HotpotQA, accuracy for FEVER
and F1 for WoW (§3.1, "Datasets and Evaluation"); any callable with the same signature serves too.

``accuracy`` is FEVER's label accuracy (KILT's metric for FEVER): 1.0 when the predicted label
equals a gold label, else 0.0. Both sides are mapped to SUPPORTS, REFUTES or NOT ENOUGH INFO first,
so spellings such as "Supported", "refuted", "NEI" or "not enough information" count as their label
(``fever_label``); a prediction that is none of the labels scores 0. It is a classification
metric, not answer containment: a gold output that is not a FEVER label raises ``ValueError``.

``contains`` is answer containment: 1.0 when a gold answer's tokens occur in the output (DPR's
match, ``erag.answers.has_answer``), for readers that answer in sentences, such as chat LLMs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from .answers import exact_match, has_answer, normalize_answer, token_f1

DownstreamMetric = Callable[[str, Sequence[str]], float]


# FEVER's labels and their spellings, compared after `normalize_answer` with the spaces removed
# (so "NOT_ENOUGH_INFO", "Not enough info." and "N.E.I." all match).
_FEVER_SPELLINGS = {
    "SUPPORTS": ("supports", "supported", "support"),
    "REFUTES": ("refutes", "refuted", "refute"),
    "NOT ENOUGH INFO": ("notenoughinfo", "notenoughinformation", "nei"),
}
_FEVER_LABEL = {spelling: label for label, spellings in _FEVER_SPELLINGS.items() for spelling in spellings}


def fever_label(text: str) -> str | None:
    """The FEVER label ``text`` spells ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO"), or None."""
    return _FEVER_LABEL.get(normalize_answer(text).replace(" ", ""))


def accuracy(prediction: str, references: Sequence[str]) -> float:
    """FEVER label accuracy: 1.0 when the prediction's label equals a gold label, else 0.0."""
    gold = [fever_label(ref) for ref in references]
    if None in gold:
        raise ValueError(
            f"accuracy is FEVER label accuracy, but gold output {references[gold.index(None)]!r} is not "
            "SUPPORTS, REFUTES or NOT ENOUGH INFO: use em or f1 for answers"
        )
    label = fever_label(prediction)
    return float(label is not None and label in gold)


@functools.lru_cache(maxsize=1)
def _rouge_l_scorer():
    from rouge_score import rouge_scorer  # imported on first use: it loads nltk, which `import erag` need not

    return rouge_scorer.RougeScorer(["rougeL"])


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure (rouge-score package) against the best reference."""
    scorer = _rouge_l_scorer()
    return max((scorer.score(ref, prediction)["rougeL"].fmeasure for ref in references), default=0.0)


def contains(prediction: str, references: Sequence[str]) -> float:
    """1.0 when a reference answer occurs in the prediction (DPR's token match), else 0.0."""
    return float(has_answer(prediction, references))


DOWNSTREAM_METRICS: dict[str, DownstreamMetric] = {
    "em": exact_match,
    "f1": token_f1,
    "accuracy": accuracy,
    "rougeL": rouge_l,
    "contains": contains,
}


def get_downstream_metric(metric: str | DownstreamMetric) -> DownstreamMetric:
    """Return the metric named ``metric`` (one of ``DOWNSTREAM_METRICS``), or ``metric`` if callable."""
    if callable(metric):
        return metric
    if metric not in DOWNSTREAM_METRICS:
        raise ValueError(
            f"unknown downstream metric {metric!r}: use one of {sorted(DOWNSTREAM_METRICS)} "
            "or a callable (prediction: str, references: list[str]) -> float in [0, 1]"
        )
    return DOWNSTREAM_METRICS[metric]
