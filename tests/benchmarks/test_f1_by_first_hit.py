"""benchmarks/f1_by_first_hit.py: F1 split by whether each order's first passage holds an answer."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("f1_by_first_hit", BENCHMARKS / "f1_by_first_hit.py")
f1_by_first_hit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(f1_by_first_hit)


def result(qid: str, re_hit: int | None, retriever_hit: int | None, f1: float, f1_retriever: float) -> dict:
    """A test_results.jsonl line: the first has-answer rank in each order and each order's F1."""
    return {
        "id": qid,
        "first_hit": {
            "re": {"has_answer": re_hit, "gold": None},
            "retriever": {"has_answer": retriever_hit, "gold": None},
        },
        "em": 0.0,
        "f1": f1,
        "em_retriever_order": 0.0,
        "f1_retriever_order": f1_retriever,
        "answer": "one two three",
        "answer_retriever_order": "one",
    }


def test_each_cell_gets_its_questions_and_its_share_of_the_difference(tmp_path, monkeypatch, capsys):
    results = [
        result("a", 1, 1, 0.5, 0.3),  # both first passages hold an answer
        result("b", 1, 3, 0.8, 0.0),  # only the RE's
        result("c", 1, None, 0.6, 0.2),  # only the RE's; no passage of the retriever's holds one
        result("d", 2, 1, 0.0, 0.4),  # only the retriever's
    ]
    table = f1_by_first_hit.f1_by_first_hit(results)
    assert table["both"]["questions"] == 1 and table["both"]["share"] == pytest.approx(0.2 / 4)
    assert table["RE only"]["questions"] == 2
    assert table["RE only"]["F1 RE"] == pytest.approx(0.7) and table["RE only"]["F1 retriever"] == pytest.approx(0.1)
    assert table["RE only"]["share"] == pytest.approx(1.2 / 4)
    assert table["retriever only"]["share"] == pytest.approx(-0.4 / 4)
    assert table["neither"]["questions"] == 0 and table["neither"]["share"] == 0.0
    # the cells' shares add up to the difference of the means
    assert sum(table[c]["share"] for c in f1_by_first_hit.CELLS.values()) == pytest.approx(
        table["all"]["F1 RE"] - table["all"]["F1 retriever"]
    )
    assert table["all"]["words"] == "3.0 / 1.0"

    run = tmp_path / "test_results.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in results))
    monkeypatch.setattr(sys, "argv", ["f1_by_first_hit.py", "--runs", str(run)])
    f1_by_first_hit.main()
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {run} | RE only |")]
    assert rows == [f"| {run} | RE only | 2 | 0.700 | 0.100 | +0.300 | 3.0 / 1.0 |"]


def test_a_row_without_answers_names_its_file_and_line(tmp_path, monkeypatch):
    run = tmp_path / "test_results.jsonl"
    row = result("a", 1, 1, 0.5, 0.3)
    del row["answer_retriever_order"]
    run.write_text(json.dumps(row) + "\n")
    monkeypatch.setattr(sys, "argv", ["f1_by_first_hit.py", "--runs", str(run)])
    with pytest.raises(ValueError, match=r"test_results.jsonl: line 1: no field 'answer_retriever_order'"):
        f1_by_first_hit.main()
