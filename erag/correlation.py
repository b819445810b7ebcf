"""Correlation between a labeling's per-query retrieval metric and the end-to-end downstream score
(§3.2, Table 1): Kendall's tau (tau-b, which accounts for ties) and Spearman's rho, from scipy.
A correlation with a constant side is undefined; the result says so in words instead of a bare NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from scipy import stats


def undefined_because(x: list[float], y: list[float]) -> str | None:
    """Why a correlation of ``x`` with ``y`` is undefined (too few queries, or one side constant),
    or None when it is defined."""
    if len(x) < 2:
        return f"{len(x)} queries: a correlation needs at least 2"
    for side, values in (("the retrieval metric", x), ("the end-to-end score", y)):
        if len(set(values)) == 1:
            return f"{side} is constant ({values[0]:g}) over the {len(values)} queries"
    return None


def _coefficient(function, x: list[float], y: list[float]) -> float:
    return math.nan if undefined_because(x, y) else float(function(x, y)[0])


def correlate(
    per_query: Mapping[str, Mapping[str, float]], end_to_end: Mapping[str, float]
) -> dict[str, dict[str, float | str | None]]:
    """``{metric: {"kendall_tau": ..., "spearman_rho": ..., "undefined": ...}}`` over the queries of
    ``end_to_end``.

    ``per_query`` is ``{query_id: {metric: value}}`` (as from ``score_labels``), ``end_to_end`` is
    ``{query_id: score}``. When either side is constant or there are fewer than 2 queries both
    coefficients are NaN (null in the JSON report) and ``undefined`` says which; else it is None.
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
            "undefined": undefined_because(x, y),
        }
    return result
