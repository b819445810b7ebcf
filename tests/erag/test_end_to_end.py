"""End-to-end scores and their correlation with eRAG and the baseline labelings."""

import math

import pytest

from erag.end_to_end import compare_with_end_to_end, end_to_end_scores

# The reader answers from the first document that says GOOD, if it is among the first two it sees.
RETRIEVAL = {
    "a": {"question": "q?", "documents": ["GOOD", "x", "x"]},
    "b": {"question": "q?", "documents": ["x", "GOOD", "x"]},
    "c": {"question": "q?", "documents": ["x", "x", "GOOD"]},
    "d": {"question": "q?", "documents": ["x", "x", "x"]},
}
EXPECTED = {qid: ["yes"] for qid in RETRIEVAL}


def reader(questions, contexts):
    return ["yes" if any("GOOD" in d for d in docs[:2]) else "no" for docs in contexts]


def test_end_to_end_reads_the_whole_list():
    calls = []

    def recording(questions, contexts):
        calls.append([len(docs) for docs in contexts])
        return reader(questions, contexts)

    result = end_to_end_scores(RETRIEVAL, EXPECTED, recording, "em", batch_size=3)
    assert result["per_query"] == {"a": 1.0, "b": 1.0, "c": 0.0, "d": 0.0}
    assert result["aggregated"] == 0.5
    assert calls == [[3, 3, 3], [3]]


def test_comparison_with_baselines():
    provenance = {"a": [0, 0, 1], "b": [0, 1, 0], "c": [1, 0, 0], "d": [0, 0, 0]}

    def judge(questions, contexts):
        return ["yes"] * len(questions)

    result = compare_with_end_to_end(
        RETRIEVAL,
        EXPECTED,
        reader,
        "em",
        ["MRR", "P@1"],
        provenance_labels=provenance,
        judge=judge,
        contains_answer=False,
    )
    assert set(result["labelings"]) == {"erag", "provenance", "llm_judge"}
    assert result["labelings"]["erag"]["labels"]["c"] == [0.0, 0.0, 1.0]
    # eRAG MRR per query: 1, 1/2, 1/3, 0 against end-to-end 1, 1, 0, 0: 4 concordant pairs, none
    # discordant, 2 of 6 pairs tied in y: tau-b = 4 / sqrt(6 * 4).
    assert result["correlation"]["erag"]["MRR"]["kendall_tau"] == pytest.approx(4 / 24**0.5)
    # Provenance MRR: 1/3, 1/2, 1, 0: 2 concordant, 2 discordant pairs.
    assert result["correlation"]["provenance"]["MRR"]["kendall_tau"] == pytest.approx(0.0)
    # The judge says yes to everything: constant MRR, undefined correlation.
    assert math.isnan(result["correlation"]["llm_judge"]["MRR"]["kendall_tau"])


def test_provenance_labels_must_cover_each_document():
    with pytest.raises(ValueError, match="query 'a': provenance_labels needs one label per retrieved document"):
        compare_with_end_to_end(RETRIEVAL, EXPECTED, reader, "em", ["MRR"], provenance_labels={"a": [1]})
