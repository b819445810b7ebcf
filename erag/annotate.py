"""eRAG annotation (§2, eq. 1): G_q[d] = E_M(M(q, {d}), y) for every d in the ranked list R_k.

The reader sees the query with one document at a time, so the cost is one single-document reader
call per (query, document): O(l k d^2) instead of O(l k^2 d^2) for the whole list (§2). Calls are
batched across queries and documents.
"""

from __future__ import annotations

from .contracts import ExpectedOutputs, Reader, RetrievalResults, run_reader, validate_inputs
from .downstream import DownstreamMetric, get_downstream_metric


def per_document_outputs(
    retrieval_results: RetrievalResults, reader: Reader, batch_size: int = 32
) -> dict[str, list[str]]:
    """Reader output M(q, {d}) for each query and each of its documents, in ranked order."""
    keys = [(qid, rank) for qid, record in retrieval_results.items() for rank in range(len(record["documents"]))]
    questions = [retrieval_results[qid]["question"] for qid, _ in keys]
    contexts = [[retrieval_results[qid]["documents"][rank]] for qid, rank in keys]
    answers = run_reader(reader, questions, contexts, batch_size)
    outputs: dict[str, list[str]] = {qid: [] for qid in retrieval_results}
    for (qid, _), answer in zip(keys, answers):
        outputs[qid].append(answer)
    return outputs


def annotate(
    retrieval_results: RetrievalResults,
    expected_outputs: ExpectedOutputs,
    reader: Reader,
    downstream_metric: str | DownstreamMetric,
    batch_size: int = 32,
) -> dict[str, list[float]]:
    """eRAG relevance labels ``{query_id: [G_q[d] for d in ranked documents]}`` (eq. 1)."""
    validate_inputs(retrieval_results, expected_outputs)
    metric = get_downstream_metric(downstream_metric)
    outputs = per_document_outputs(retrieval_results, reader, batch_size)
    return {
        qid: [float(metric(answer, list(expected_outputs[qid]))) for answer in answers]
        for qid, answers in outputs.items()
    }
