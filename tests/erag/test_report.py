"""JSON report and per-query scatter."""

import json

import pytest

from erag import compare_with_end_to_end, evaluate, write_report

RETRIEVAL = {
    qid: {"question": "q", "documents": docs}
    for qid, docs in {"a": ["GOOD", "x"], "b": ["x", "GOOD"], "c": ["x", "x"]}.items()
}
EXPECTED = {qid: ["yes"] for qid in RETRIEVAL}


def reader(questions, contexts):
    return ["yes" if "GOOD" in docs[0] else "no" for docs in contexts]


def test_write_report_json_and_png(tmp_path):
    result = compare_with_end_to_end(RETRIEVAL, EXPECTED, reader, "em", ["P@1", "MRR", "NDCG@2", "Hit@2"])
    write_report(result, tmp_path / "out" / "erag.json", tmp_path / "out" / "erag.png")
    saved = json.loads((tmp_path / "out" / "erag.json").read_text())
    assert saved["end_to_end"]["per_query"] == {"a": 1.0, "b": 0.0, "c": 0.0}
    assert saved["correlation"]["erag"]["P@1"]["kendall_tau"] == pytest.approx(1.0)
    assert saved["correlation"]["contains_answer"]["Hit@2"]["kendall_tau"] is None  # constant labels: NaN -> null
    assert "constant" in saved["correlation"]["contains_answer"]["Hit@2"]["undefined"]
    assert (tmp_path / "out" / "erag.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_result_writes_json_but_has_nothing_to_plot(tmp_path):
    result = evaluate(RETRIEVAL, EXPECTED, reader, "em", ["P@1"])
    write_report(result, tmp_path / "erag.json")
    assert json.loads((tmp_path / "erag.json").read_text())["aggregated"]["P@1"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="needs end-to-end scores"):
        write_report(result, tmp_path / "erag.json", tmp_path / "erag.png")
