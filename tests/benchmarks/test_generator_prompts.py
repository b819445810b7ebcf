"""benchmarks/generator_prompts.py: each question's passages with and without its answer, the scores,
and a row per template from a tiny random Llama (offline)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.erag.conftest import llama  # noqa: F401 (fixture)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("generator_prompts", BENCHMARKS / "generator_prompts.py")
generator_prompts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generator_prompts)


def record(qid: str, has_answer: list[bool]) -> dict:
    ctxs = [
        {"id": f"{qid}.{j}", "title": "t", "text": f"paris is the capital {j}", "has_answer": h}
        for j, h in enumerate(has_answer)
    ]
    return {"id": qid, "question": "what is the capital of france", "answers": ["paris"], "ctxs": ctxs}


def test_each_question_gets_its_first_passage_with_and_without_the_answer():
    records = [
        record("a", [False, True, True]),
        record("b", [True, True]),
        record("c", [True, False, False]),
        record("d", [False, True]),
    ]
    pairs = generator_prompts.passage_pairs(records, n=2)
    assert [(r["id"], w["id"], wo["id"]) for r, w, wo in pairs] == [
        ("a", "a.1", "a.0"),
        ("c", "c.0", "c.1"),
    ]  # b: none without


def test_scores_are_squad_f1_em_and_words():
    scores = generator_prompts.score_answers(["Paris", "the seine river"], [["paris"], ["Seine"]])
    assert scores["F1"] == pytest.approx((1.0 + 2 / 3) / 2)  # "the" is dropped: seine river vs seine
    assert scores["EM"] == 0.5 and scores["words"] == 2.0


def test_main_prints_a_row_per_template(tmp_path, monkeypatch, capsys, llama):
    model, tokenizer = llama
    model.save_pretrained(tmp_path / "lm")
    tokenizer.save_pretrained(tmp_path / "lm")
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps(record(q, [False, True])) + "\n" for q in "abc"))
    templates = ["{question} context {text}", "context {text} question {question}"]
    argv = ["generator_prompts.py", "--data", str(data), "--model", str(tmp_path / "lm"), "--max-answer-length", "4"]
    monkeypatch.setattr(sys, "argv", [*argv, "--templates", *templates])
    generator_prompts.main()
    out = capsys.readouterr().out
    assert out.startswith(f"3 questions of {data}")
    rows = [line for line in out.splitlines() if line.startswith("| '")]
    assert [row.split(" | ")[0] for row in rows] == [f"| {t!r}" for t in templates]
    for row in rows:
        f1_with, f1_without, gap = (float(v) for v in row.split(" | ")[1:4])
        assert (
            0.0 <= f1_with <= 1.0 and 0.0 <= f1_without <= 1.0 and gap == pytest.approx(f1_with - f1_without, abs=2e-3)
        )


def test_a_file_without_both_kinds_is_a_clear_error(tmp_path, monkeypatch):
    data = tmp_path / "test.jsonl"
    data.write_text(json.dumps(record("a", [True, True])) + "\n")
    monkeypatch.setattr(sys, "argv", ["generator_prompts.py", "--data", str(data)])
    with pytest.raises(SystemExit, match="no question has contexts both with and without"):
        generator_prompts.main()
