"""``evaluate``: the eRAG entry point, with the signature of the official eRAG package."""

from __future__ import annotations

from collections.abc import Sequence

from .annotate import annotate
from .contracts import ExpectedOutputs, Reader, RetrievalResults
from .downstream import DownstreamMetric
from .retrieval_metrics import parse_metric, score_labels


def evaluate(
    retrieval_results: RetrievalResults,
    expected_outputs: ExpectedOutputs,
    reader: Reader,
    downstream_metric: str | DownstreamMetric,
    metrics: Sequence[str],
    *,
    batch_size: int = 32,
    relevance_threshold: float | None = None,
) -> dict:
    """Evaluate ranked lists with eRAG: label each document by the reader's downstream score on
    that document alone (eq. 1), then score the lists with retrieval metrics (§2).

    Args:
        retrieval_results: ``{query_id: {"question": str, "documents": [str, ...]}}``, documents
            in ranked order.
        expected_outputs: ``{query_id: [gold output, ...]}``.
        reader: callable ``(questions, contexts) -> answers``; called with one document per question.
        downstream_metric: ``"em"``, ``"f1"``, ``"accuracy"`` (FEVER labels), ``"rougeL"`` or a callable
            ``(prediction, references) -> float`` in [0, 1].
        metrics: names such as ``"P@5"``, ``"R@5"``, ``"MAP"``, ``"MRR"``, ``"NDCG@10"``, ``"Hit@5"``.
        batch_size: (query, document) pairs per reader call.
        relevance_threshold: binarizes graded labels for R, MAP and MRR (see ``retrieval_metrics``).

    Returns:
        ``{"per_query": {query_id: {metric: value}}, "aggregated": {metric: value},
        "labels": {query_id: [label per document]}}``.
    """
    for name in metrics:  # fail on a bad name before running the reader
        parse_metric(name)
    labels = annotate(retrieval_results, expected_outputs, reader, downstream_metric, batch_size)
    return {**score_labels(labels, metrics, relevance_threshold), "labels": labels}
