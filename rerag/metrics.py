"""Evaluation metrics as torchmetrics Metrics, so they sync across DDP processes, the
per-question facts that paired comparisons of runs are computed from, and the AUROC of a
confidence (calibration reports, the RE's pretraining log).

Recall@k is the share of questions with a relevant context in the top k (DPR's
top-k accuracy), torchmetrics' RetrievalHitRate; "relevant" is `has_answer` (the answer string
is in the passage) or `gold` (the passage holds the question's own answer span).
"""

from __future__ import annotations

import numpy as np
import torch
from torchmetrics import MetricCollection
from torchmetrics.retrieval import RetrievalHitRate


def recall_at_k(ks: list[int]) -> MetricCollection:
    """Recall@k for each k; update with (scores, relevant, question index), flattened."""
    return MetricCollection({f"recall@{k}": RetrievalHitRate(top_k=k) for k in ks})


def first_hit_rank(scores: torch.Tensor, relevant: torch.Tensor) -> int | None:
    """1-based rank of the best-ranked relevant item when ranked by `scores` (descending, ties in
    list order), None when none is relevant: Recall@k of a question is `rank <= k`."""
    order = torch.argsort(scores, descending=True, stable=True)
    hits = torch.nonzero(relevant[order]).flatten()
    return int(hits[0]) + 1 if len(hits) else None


def hits_at_k(ranks, k: int) -> np.ndarray:
    """Per question, 1.0 when its first relevant rank (`first_hit_rank`; None: no relevant item) is
    within the top k, else 0.0: the terms whose mean is Recall@k."""
    return np.array([rank is not None and rank <= k for rank in ranks], dtype=np.float64)


def teacher_margin(answer_loglik: torch.Tensor, gold: torch.Tensor) -> torch.Tensor | None:
    """How sharp the generator is as a teacher: F(gold) - max F(other context), F_ij = log P_G(a_i | q_i,
    c_ij) (eq. 8), averaged over the questions of a [b, k] batch with one gold context and at least
    one other (None when there is none). Positive: Q_G puts the gold passage first. Logged, never a
    loss: the gold label does not reach training."""
    usable = (gold.sum(-1) == 1) & (gold.shape[-1] > 1)
    if not usable.any():
        return None
    f, g = answer_loglik[usable].detach().float(), gold[usable]
    best_other = f.masked_fill(g, float("-inf")).max(-1).values
    return (f[g] - best_other).mean()


def auroc(confidence, labels) -> float:
    """Area under the ROC curve of `confidence` for label 1 (NaN when only one class is present)."""
    from torchmetrics.functional.classification import binary_auroc

    y = np.asarray(labels).astype(np.int64)
    if y.min() == y.max():
        return float("nan")
    return float(
        binary_auroc(torch.as_tensor(np.asarray(confidence, dtype=np.float64)), torch.as_tensor(y), validate_args=False)
    )
