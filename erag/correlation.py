"""Correlation between a labeling's per-query retrieval metric and the end-to-end downstream score
(§3.2, Table 1): Kendall's tau (tau-b, which accounts for ties) and Spearman's rho, from scipy.
"""
from __future__ import annotations

import math
import warnings
from typing import Mapping

from scipy import stats


def _coefficient(function, x: list[float], y: list[float]) -> float:
    if len(x) < 2:
        return math.nan
    with warnings.catch_warnings():  # a constant input has no defined correlation: NaN
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return float(function(x, y)[0])


def correlate(
    per_query: Mapping[str, Mapping[str, float]], end_to_end: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """``{metric: {"kendall_tau": ..., "spearman_rho": ...}}`` over the queries of ``end_to_end``.

    ``per_query`` is ``{query_id: {metric: value}}`` (as from ``score_labels``), ``end_to_end`` is
    ``{query_id: score}``. A correlation is NaN when either side is constant or has < 2 queries.
    """
    if set(per_query) != set(end_to_end):
        missing = sorted(set(per_query) ^ set(end_to_end))[:5]
        raise ValueError(f"per-query metrics and end-to-end scores cover different queries, e.g. {missing}")
    qids = list(end_to_end)
    y = [float(end_to_end[qid]) for qid in qids]
    metrics = per_query[qids[0]].keys() if qids else ()
    result = {}
    for metric in metrics:
        x = [float(per_query[qid][metric]) for qid in qids]
        result[metric] = {
            "kendall_tau": _coefficient(stats.kendalltau, x, y),
            "spearman_rho": _coefficient(stats.spearmanr, x, y),
        }
    return result
