"""Retrieval metrics E_R(R_k, G_q) over per-document relevance labels (§2, "Retrieval Evaluation
Metrics"): P@k, R@k, MAP, MRR, NDCG@k and Hit@k, per query and averaged over queries.

Labels are given in ranked order, so the list order is the ranking. Binary labels go through
``torchmetrics.functional.retrieval``. Graded labels (any label strictly between 0 and 1, e.g. from
F1 or ROUGE-L) follow the paper's footnotes to Table 1: precision is the mean label (the top-k
labels summed and divided by k) and Hit is the maximum label; NDCG takes the labels as gains.
Recall, MAP and MRR need binary labels: with graded labels they require ``relevance_threshold``,
which marks a document relevant when its label is at least the threshold.

eRAG only knows the labels of retrieved documents: they are its qrels, so R, the number of relevant
documents of a query, is the number of relevant documents in the whole retrieved list. R@k and MAP
divide by R. MAP@k is trec_eval's ``map_cut.k`` (what the official eRAG package reports through
pytrec_eval): AP@k = (sum of precision@i over the ranks i <= k of relevant documents) / R, not
divided by min(k, R) nor by the relevant documents within the top k. torchmetrics'
``retrieval_average_precision(top_k=k)`` divides by the latter, so its value is rescaled by
(relevant in the top k) / R; without a cut-off the two agree. A cut-off on MRR cuts the list at k
first; P@k divides by k even when fewer than k documents were retrieved.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence

import torch
from torchmetrics.functional import retrieval as tm

_METRIC_NAME = re.compile(r"^(P|R|MAP|MRR|NDCG|Hit)(?:@([1-9][0-9]*))?$", re.IGNORECASE)
_KINDS = {"p": "P", "r": "R", "map": "MAP", "mrr": "MRR", "ndcg": "NDCG", "hit": "Hit"}
_BINARY_ONLY = {"R", "MAP", "MRR"}
_TORCHMETRICS = {
    "P": tm.retrieval_precision,
    "R": tm.retrieval_recall,
    "MAP": tm.retrieval_average_precision,
    "MRR": tm.retrieval_reciprocal_rank,
    "NDCG": tm.retrieval_normalized_dcg,
    "Hit": tm.retrieval_hit_rate,
}


def parse_metric(name: str) -> tuple[str, int | None]:
    """``"NDCG@10"`` -> ``("NDCG", 10)``; without ``@k`` the whole list counts (k is None)."""
    match = _METRIC_NAME.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(
            f"unknown retrieval metric {name!r}: use P, R, MAP, MRR, NDCG or Hit, optionally "
            "with a cut-off, e.g. 'P@5', 'R@5', 'MAP', 'MRR', 'NDCG@10', 'Hit@5'"
        )
    kind, k = match.groups()
    return _KINDS[kind.lower()], int(k) if k else None


def check_labels(labels: Mapping[str, Sequence[float]]) -> None:
    """Raise ``ValueError`` naming the query and document of any label outside [0, 1]."""
    for qid, values in labels.items():
        for rank, value in enumerate(values):
            if not (isinstance(value, numbers.Real) and 0.0 <= value <= 1.0):
                raise ValueError(
                    f"relevance label {value!r} of query {qid!r}, document {rank} (rank {rank + 1}) "
                    "is outside [0, 1]: downstream metrics must return values in [0, 1]"
                )


def _query_value(kind: str, k: int | None, labels: Sequence[float], binary: bool) -> float:
    if not labels:  # nothing retrieved, nothing relevant
        return 0.0
    target = torch.tensor(labels, dtype=torch.float64)
    if not binary and kind == "P":  # footnote a of Table 1: mean label
        return float(target[:k].sum() / (k or len(labels)))
    if not binary and kind == "Hit":  # footnote b of Table 1: maximum label
        return float(target[:k].max())
    preds = torch.arange(len(labels), 0, -1, dtype=torch.float64)  # ranked order, all scores > 0
    value = float(_TORCHMETRICS[kind](preds, target if kind == "NDCG" else target.long(), top_k=k))
    if kind == "MAP" and value:  # trec_eval's map_cut.k divides by R, torchmetrics by the hits in the top k
        value *= float(target[:k].sum() / target.sum())
    return value


def score_labels(
    labels: Mapping[str, Sequence[float]],
    metrics: Sequence[str],
    relevance_threshold: float | None = None,
) -> dict[str, dict]:
    """``{"per_query": {query_id: {metric: value}}, "aggregated": {metric: mean over queries}}``."""
    if not labels:
        raise ValueError("no queries to score")
    check_labels(labels)
    parsed = {name: parse_metric(name) for name in metrics}
    if relevance_threshold is not None and not 0.0 < relevance_threshold <= 1.0:
        raise ValueError(f"relevance_threshold must lie in (0, 1], got {relevance_threshold}")
    graded = next(
        ((qid, rank, v) for qid, vs in labels.items() for rank, v in enumerate(vs) if v not in (0, 1)),
        None,
    )
    per_query: dict[str, dict[str, float]] = {qid: {} for qid in labels}
    for name, (kind, k) in parsed.items():
        needs_binary = graded is not None and kind in _BINARY_ONLY
        if needs_binary and relevance_threshold is None:
            qid, rank, value = graded
            raise ValueError(
                f"{name} needs binary relevance labels, but the labels are graded (query {qid!r}, "
                f"document {rank} has {value}): pass relevance_threshold, or use P, Hit or NDCG"
            )
        for qid, values in labels.items():
            if needs_binary:
                values = [float(v >= relevance_threshold) for v in values]
            per_query[qid][name] = _query_value(kind, k, values, binary=graded is None or needs_binary)
    aggregated = {name: math.fsum(q[name] for q in per_query.values()) / len(per_query) for name in parsed}
    return {"per_query": per_query, "aggregated": aggregated}
