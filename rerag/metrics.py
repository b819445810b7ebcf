"""Evaluation metrics as torchmetrics Metrics, so they sync across DDP processes.

`ExactMatch` uses SQuAD normalization. Recall@k is the share of questions with an
answer-bearing context in the top k (DPR's top-k accuracy), torchmetrics' RetrievalHitRate.
"""
from __future__ import annotations

import torch
from torchmetrics import Metric, MetricCollection
from torchmetrics.retrieval import RetrievalHitRate

from erag.answers import exact_match


class ExactMatch(Metric):
    full_state_update = False

    def __init__(self):
        super().__init__()
        self.add_state("correct", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, predictions: list[str], answers: list[list[str]]) -> None:
        self.correct += sum(exact_match(p, a) for p, a in zip(predictions, answers))
        self.total += len(predictions)

    def compute(self) -> torch.Tensor:
        return self.correct / self.total.clamp(min=1)


def recall_at_k(ks: list[int]) -> MetricCollection:
    """Recall@k for each k; update with (scores, has_answer, question index), flattened."""
    return MetricCollection({f"recall@{k}": RetrievalHitRate(top_k=k) for k in ks})
