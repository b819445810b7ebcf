"""eRAG annotation (eq. 1): one single-document reader call per (query, document), batched."""

import pytest

import erag
from erag.annotate import annotate

RETRIEVAL = {
    "q1": {"question": "capital of France?", "documents": ["noise", "GOOD paris doc", "more noise", "GOOD"]},
    "q2": {"question": "capital of France?", "documents": ["GOOD", "noise"]},  # same text, other query
    "q3": {"question": "largest planet?", "documents": ["nothing", "still nothing", "GOOD jupiter"]},
}
EXPECTED = {"q1": ["Paris"], "q2": ["Paris"], "q3": ["Jupiter"]}
ANSWERS = {"capital of France?": "Paris", "largest planet?": "Jupiter"}


class OracleReader:
    """Answers correctly only from documents marked GOOD; records every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, questions, contexts):
        self.calls.append((list(questions), [list(c) for c in contexts]))
        return [ANSWERS[q] if any("GOOD" in d for d in docs) else "no idea" for q, docs in zip(questions, contexts)]


def test_labels_come_from_the_chosen_documents():
    labels = annotate(RETRIEVAL, EXPECTED, OracleReader(), "em", batch_size=4)
    assert labels == {"q1": [0.0, 1.0, 0.0, 1.0], "q2": [1.0, 0.0], "q3": [0.0, 0.0, 1.0]}


def test_evaluate_returns_expected_metrics():
    result = erag.evaluate(RETRIEVAL, EXPECTED, OracleReader(), "em", ["P@2", "R@2", "MRR", "Hit@1", "MAP"])
    expected = {
        "q1": {"P@2": 0.5, "R@2": 0.5, "MRR": 0.5, "Hit@1": 0.0, "MAP": 0.5},  # relevant at ranks 2 and 4
        "q2": {"P@2": 0.5, "R@2": 1.0, "MRR": 1.0, "Hit@1": 1.0, "MAP": 1.0},
        "q3": {"P@2": 0.0, "R@2": 0.0, "MRR": 1 / 3, "Hit@1": 0.0, "MAP": 1 / 3},
    }
    for qid, values in expected.items():
        assert result["per_query"][qid] == pytest.approx(values)
    assert result["aggregated"]["MRR"] == pytest.approx((0.5 + 1 + 1 / 3) / 3)
    assert set(result) == {"per_query", "aggregated", "labels"}


def test_calls_are_single_document_full_length_sorted_batches():
    reader = OracleReader()
    annotate(RETRIEVAL, EXPECTED, reader, "em", batch_size=4)
    assert [len(questions) for questions, _ in reader.calls] == [4, 4, 1]  # 9 pairs
    flat = [(q, docs) for questions, contexts in reader.calls for q, docs in zip(questions, contexts)]
    assert all(len(docs) == 1 for _, docs in flat)
    lengths = [len(q) + len(docs[0]) for q, docs in flat]
    assert lengths == sorted(lengths, reverse=True)


def test_same_question_text_stays_two_queries():
    labels = annotate(RETRIEVAL, EXPECTED, OracleReader(), "em")
    assert labels["q1"] != labels["q2"] and len(labels["q2"]) == 2


def test_label_outside_unit_interval_names_query_and_document():
    def metric(prediction, references):
        return 2.0 if prediction == "Jupiter" else 0.0

    with pytest.raises(ValueError, match=r"query 'q3', document 2 \(rank 3\) is outside \[0, 1\]"):
        erag.evaluate(RETRIEVAL, EXPECTED, OracleReader(), metric, ["P@1"])


def test_bad_metric_name_fails_before_reading():
    reader = OracleReader()
    with pytest.raises(ValueError, match="unknown retrieval metric 'Precision@5'"):
        erag.evaluate(RETRIEVAL, EXPECTED, reader, "em", ["Precision@5"])
    assert reader.calls == []


def test_malformed_inputs_and_readers_raise():
    with pytest.raises(ValueError, match="query 'q3' has no entry in expected_outputs"):
        annotate(RETRIEVAL, {"q1": ["Paris"], "q2": ["Paris"]}, OracleReader(), "em")
    with pytest.raises(ValueError, match="query 'x': 'documents' must be a list of strings"):
        annotate({"x": {"question": "q", "documents": "one string"}}, {"x": ["a"]}, OracleReader(), "em")
    with pytest.raises(ValueError, match="one string per question"):
        annotate(RETRIEVAL, EXPECTED, lambda questions, contexts: ["only one"], "em", batch_size=2)
