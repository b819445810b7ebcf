"""End-to-end evaluation and its comparison with document-level labelings (§3.2, Table 1).

The reader answers each query from its whole ranked list (concatenated, or FiD-style when the reader
does so), the answer is scored with the downstream metric, and each labeling's per-query retrieval
metric is correlated with that score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .annotate import annotate
from .baselines import contains_answer_labels, llm_judge_labels
from .contracts import ExpectedOutputs, Reader, RetrievalResults, run_reader, validate_inputs
from .correlation import correlate
from .downstream import DownstreamMetric, get_downstream_metric
from .retrieval_metrics import parse_metric, score_labels


def end_to_end_scores(
    retrieval_results: RetrievalResults,
    expected_outputs: ExpectedOutputs,
    reader: Reader,
    downstream_metric: str | DownstreamMetric,
    batch_size: int = 1,
) -> dict:
    """``{"per_query": {query_id: E_M(M(q, R_k), y)}, "aggregated": mean}``; ``batch_size`` queries
    (each with its whole list) per reader call."""
    validate_inputs(retrieval_results, expected_outputs)
    metric = get_downstream_metric(downstream_metric)
    qids = list(retrieval_results)
    answers = run_reader(
        reader,
        [retrieval_results[qid]["question"] for qid in qids],
        [list(retrieval_results[qid]["documents"]) for qid in qids],
        batch_size,
    )
    per_query = {qid: float(metric(answer, list(expected_outputs[qid]))) for qid, answer in zip(qids, answers)}
    return {"per_query": per_query, "aggregated": math.fsum(per_query.values()) / len(per_query)}


def compare_with_end_to_end(
    retrieval_results: RetrievalResults,
    expected_outputs: ExpectedOutputs,
    reader: Reader,
    downstream_metric: str | DownstreamMetric,
    metrics: Sequence[str],
    *,
    contains_answer: bool = True,
    provenance_labels: Mapping[str, Sequence[float]] | None = None,
    judge: Reader | None = None,
    batch_size: int = 32,
    end_to_end_batch_size: int = 1,
    relevance_threshold: float | None = None,
) -> dict:
    """Score eRAG and the baseline labelings, and correlate each with end-to-end performance.

    Labelings: ``"erag"`` (eq. 1 with ``reader``), ``"contains_answer"`` (DPR match, when
    ``contains_answer``), ``"provenance"`` (``provenance_labels``, one label per retrieved
    document, when given) and ``"llm_judge"`` (``judge``, when given).

    Returns:
        ``{"end_to_end": {"per_query", "aggregated"},
        "labelings": {name: {"per_query", "aggregated", "labels"}},
        "correlation": {name: {metric: {"kendall_tau", "spearman_rho"}}}}``.
    """
    for name in metrics:  # fail on a bad name before running the reader
        parse_metric(name)
    validate_inputs(retrieval_results, expected_outputs)
    end_to_end = end_to_end_scores(
        retrieval_results, expected_outputs, reader, downstream_metric, end_to_end_batch_size
    )
    labelings = {"erag": annotate(retrieval_results, expected_outputs, reader, downstream_metric, batch_size)}
    if contains_answer:
        labelings["contains_answer"] = contains_answer_labels(retrieval_results, expected_outputs)
    if provenance_labels is not None:
        for qid, record in retrieval_results.items():
            if len(provenance_labels.get(qid, ())) != len(record["documents"]):
                raise ValueError(f"query {qid!r}: provenance_labels needs one label per retrieved document")
        labelings["provenance"] = {qid: list(provenance_labels[qid]) for qid in retrieval_results}
    if judge is not None:
        labelings["llm_judge"] = llm_judge_labels(retrieval_results, judge, batch_size)
    scored = {
        name: {**score_labels(labels, metrics, relevance_threshold), "labels": labels}
        for name, labels in labelings.items()
    }
    return {
        "end_to_end": end_to_end,
        "labelings": scored,
        "correlation": {name: correlate(s["per_query"], end_to_end["per_query"]) for name, s in scored.items()},
    }
