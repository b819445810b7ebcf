"""Evaluation metrics as torchmetrics Metrics, so they sync across DDP processes, and the
per-question facts that paired comparisons of runs are computed from.

`AnswerScore` averages a per-question answer score (exact match or token F1, SQuAD
normalization). Recall@k is the share of questions with a relevant context in the top k (DPR's
top-k accuracy), torchmetrics' RetrievalHitRate; "relevant" is `has_answer` (the answer string
is in the passage) or `gold` (the passage holds the question's own answer span).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torchmetrics import Metric, MetricCollection
from torchmetrics.retrieval import RetrievalHitRate



class AnswerScore(Metric):
    """Mean of `score(prediction, references)` over questions, e.g. `erag.answers.exact_match` or
    `token_f1`."""

    full_state_update = False

    def __init__(self, score: Callable[[str, Sequence[str]], float]):
        super().__init__()
        self.score = score
        self.add_state("total_score", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, predictions: list[str], answers: list[list[str]]) -> None:
        self.total_score += sum(self.score(p, a) for p, a in zip(predictions, answers))
        self.total += len(predictions)

    def compute(self) -> torch.Tensor:
        return (self.total_score / self.total.clamp(min=1)).float()


def recall_at_k(ks: list[int]) -> MetricCollection:
    """Recall@k for each k; update with (scores, relevant, question index), flattened."""
    return MetricCollection({f"recall@{k}": RetrievalHitRate(top_k=k) for k in ks})


def first_hit_rank(scores: torch.Tensor, relevant: torch.Tensor) -> int | None:
    """1-based rank of the best-ranked relevant item when ranked by `scores` (descending, ties in
    list order), None when none is relevant: Recall@k of a question is `rank <= k`."""
    order = torch.argsort(scores, descending=True, stable=True)
    hits = torch.nonzero(relevant[order]).flatten()
    return int(hits[0]) + 1 if len(hits) else None
