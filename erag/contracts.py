"""The contracts every package shares, defined once here, and the inputs eRAG takes.

- ``Reader``: the LLM M of eRAG §2 (and EoR's RALM, RE-RAG's generator as a reader): any callable
  ``(questions, contexts) -> answers`` where ``contexts[i]`` is the list of passages (strings)
  given with ``questions[i]``; one answer string per question.
- ``Reranker``: ``(question, passages) -> scores``, one float per passage, higher is more
  relevant (EoR's @RR op; RE-RAG's ``RelevanceEstimator.score``).

eRAG's inputs are keyed by query id, so two queries with the same text stay two queries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .progress import progress

Reader = Callable[[list[str], list[list[str]]], list[str]]
Reranker = Callable[[str, list[str]], Sequence[float]]
RetrievalResults = Mapping[str, Mapping[str, object]]  # {query_id: {"question": str, "documents": [str]}}
ExpectedOutputs = Mapping[str, Sequence[str]]  # {query_id: [gold output, ...]}


def _is_str_list(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def validate_inputs(retrieval_results: RetrievalResults, expected_outputs: ExpectedOutputs) -> None:
    """Raise ``ValueError`` naming the query whose record is malformed or has no expected output."""
    if not retrieval_results:
        raise ValueError("retrieval_results is empty")
    for query_id, record in retrieval_results.items():
        if not isinstance(record, Mapping) or not isinstance(record.get("question"), str):
            raise ValueError(f"query {query_id!r}: expected {{'question': str, 'documents': [str, ...]}}")
        if not _is_str_list(record.get("documents")):
            raise ValueError(f"query {query_id!r}: 'documents' must be a list of strings")
        if query_id not in expected_outputs:
            raise ValueError(f"query {query_id!r} has no entry in expected_outputs")
        if not _is_str_list(expected_outputs[query_id]):
            raise ValueError(f"query {query_id!r}: expected outputs must be a list of strings")


def run_reader(reader: Reader, questions: list[str], contexts: list[list[str]], batch_size: int) -> list[str]:
    """Call ``reader`` on full batches of inputs sorted by length (longest first, so that memory
    peaks in the first batch and padding stays small) and return the answers in input order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(
        range(len(questions)),
        key=lambda i: len(questions[i]) + sum(map(len, contexts[i])),
        reverse=True,
    )
    answers: list[str] = [""] * len(questions)
    for start in progress(range(0, len(order), batch_size), "reader", unit="batches"):
        batch = order[start : start + batch_size]
        outputs = reader([questions[i] for i in batch], [list(contexts[i]) for i in batch])
        if not _is_str_list(outputs) or len(outputs) != len(batch):
            raise ValueError(
                f"reader must return a list with one string per question, got {outputs!r:.200} "
                f"for {len(batch)} questions"
            )
        for i, output in zip(batch, outputs):
            answers[i] = output
    return answers
