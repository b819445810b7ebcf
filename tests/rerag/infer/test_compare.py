import json
from pathlib import Path

import numpy as np
import pytest

from rerag.infer.compare import compare, markdown


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def row(i, re_rank, retriever_rank, em, em_retriever_order):
    hit = {
        "re": {"gold": re_rank, "has_answer": re_rank},
        "retriever": {"gold": retriever_rank, "has_answer": retriever_rank},
    }
    return {
        "id": f"q{i}",
        "index": i,
        "answer": "a",
        "answer_retriever_order": "b",
        "first_hit": hit,
        "em": em,
        "f1": em,
        "em_retriever_order": em_retriever_order,
        "f1_retriever_order": em_retriever_order,
    }


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(0)
    n = 200
    retriever = rng.integers(1, 4, n)
    trained = [row(i, 1, int(retriever[i]), 1.0, float(i % 2)) for i in range(n)]  # RE always right
    untrained = [row(i, int(retriever[i]) + 1, int(retriever[i]), 0.0, 0.0) for i in range(n)]
    return {"zero_shot": write(tmp_path / "zs.jsonl", untrained), "rerag": write(tmp_path / "t.jsonl", trained)}


def test_figures_and_paired_differences(runs):
    report = compare(runs, retriever="rerag", resamples=500)
    systems = report["systems"]
    assert systems["rerag"]["gold R@1"] == {"value": 1.0, "ci": [1.0, 1.0]}
    assert systems["zero_shot"]["gold R@1"]["value"] == 0.0
    bm25 = systems["retriever"]["gold R@1"]
    low, high = bm25["ci"]
    assert low < bm25["value"] < high and high - low < 0.2
    assert systems["retriever"]["EM"]["value"] == pytest.approx(0.5)  # the trained run's answer_retriever_order
    diff = report["differences"]["rerag - retriever"]["gold R@1"]
    assert diff["value"] == pytest.approx(1.0 - bm25["value"])
    assert diff["ci"][0] > 0  # paired: the RE is never worse on any question
    assert "rerag - zero_shot" in report["differences"]
    assert "| rerag | " in markdown(report)


def test_runs_on_other_questions_are_refused(runs, tmp_path):
    other = write(tmp_path / "other.jsonl", [row(0, 1, 1, 1.0, 1.0)])
    with pytest.raises(ValueError, match="holds other questions"):
        compare({**runs, "other": other})


def test_a_bad_line_names_the_file_and_line(runs, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row(0, 1, 1, 1.0, 1.0)) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl: line 2"):
        compare({"bad": bad})


def test_a_row_without_a_needed_field_names_the_file_line_and_field(runs, tmp_path):
    rows = [json.loads(line) for line in Path(runs["rerag"]).read_text().splitlines()]
    del rows[1]["em_retriever_order"]  # as rows of an older version, which named it em_retriever
    old = write(tmp_path / "old.jsonl", rows)
    compare({**runs, "rerag": old})  # the field is needed only where the retriever's answers come from
    with pytest.raises(ValueError, match=r"old\.jsonl: line 2: no field 'em_retriever_order'"):
        compare({**runs, "rerag": old}, retriever="rerag")
