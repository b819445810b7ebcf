"""benchmarks/first_pick_ranks.py: a miss's first pick and gold passage are binned by the retriever's rank."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("first_pick_ranks", BENCHMARKS / "first_pick_ranks.py")
first_pick_ranks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(first_pick_ranks)


def record(qid: str, n: int = 20) -> dict:
    ctxs = [{"id": f"{qid}.{j}", "title": "", "text": f"passage {j}", "has_answer": False} for j in range(n)]
    return {"id": qid, "question": f"question {qid}?", "answers": ["x"], "ctxs": ctxs}


def result(qid: str, pick: int, gold: int | None, re_gold: int | None) -> dict:
    """A test_results.jsonl line: the RE's first pick at retriever rank `pick` (1-based), the gold
    passage at retriever rank `gold` and RE rank `re_gold`."""
    return {
        "id": qid,
        "contexts": [{"id": f"{qid}.{pick - 1}", "re_score": 1.0}],
        "first_hit": {"re": {"gold": re_gold}, "retriever": {"gold": gold}},
    }


def test_misses_are_binned_by_the_retrievers_rank(tmp_path, monkeypatch, capsys):
    results = [
        result("a", pick=3, gold=3, re_gold=1),  # a hit: not counted as a miss
        result("b", pick=1, gold=2, re_gold=2),  # BM25's first, gold second
        result("c", pick=7, gold=1, re_gold=4),  # a deep pick over BM25's gold first
        result("d", pick=20, gold=5, re_gold=9),
        result("e", pick=4, gold=None, re_gold=None),  # no gold passage: left out
    ]
    records = {r["id"]: record(r["id"]) for r in results}
    records["c"]["ctxs"][6]["text"] = "a longer passage than the gold one"  # c's first pick, 7 words against 2
    counts = first_pick_ranks.first_pick_ranks(results, records, [1, 4, 20])
    assert counts == {
        "with gold": 4,
        "RE misses": 3,
        **{"pick 1": 1, "pick 2-4": 0, "pick 5-20": 2, "pick >20": 0},
        **{"gold 1": 1, "gold 2-4": 1, "gold 5-20": 1, "gold >20": 0},
        "pick longer than gold": 1,
    }

    run, data = tmp_path / "test_results.jsonl", tmp_path / "test.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in results))
    data.write_text("".join(json.dumps(r) + "\n" for r in records.values()))
    monkeypatch.setattr(sys, "argv", ["first_pick_ranks.py", "--runs", str(run), "--data", str(data)])
    first_pick_ranks.main()
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {run} |")]
    assert row == [f"| {run} | 4 | 3 | 1 | 0 | 2 | 0 | 1 | 1 | 1 | 0 | 1 |"]


def test_a_question_missing_from_the_data_is_a_clear_error():
    with pytest.raises(ValueError, match="'b'.*not in the data file"):
        first_pick_ranks.first_pick_ranks([result("b", 2, 1, 2)], {"a": record("a")}, [1, 4, 20])
