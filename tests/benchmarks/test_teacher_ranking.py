"""benchmarks/teacher_ranking.py: the teacher's order is its F read one row at a time, the recall
columns read an order as built, and main prints a row per order. Offline: tiny Llama, the tiny world."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from erag.lm import encode_answers, encode_prompts
from rerag.data.fid_format import read_fid
from rerag.fit_config import build_fit
from rerag.inputs import fill
from tests.benchmarks.test_re_alone import write_config
from tests.rerag.conftest import chat_tokenizer_dir, tokenizer_dir, world_dir  # noqa: F401 (fixtures)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("teacher_ranking", BENCHMARKS / "teacher_ranking.py")
teacher_ranking = importlib.util.module_from_spec(spec)
spec.loader.exec_module(teacher_ranking)


def with_gold(src: Path, dst: Path) -> Path:
    """The file with its first answer-holding context of each question marked gold (the tiny world has none)."""
    with open(dst, "w") as out:
        for line in open(src):
            r = json.loads(line)
            for c in r["ctxs"]:
                c["gold"] = False
            first = next((c for c in r["ctxs"] if c["has_answer"]), None)
            if first is not None:
                first["gold"] = True
            out.write(json.dumps(r) + "\n")
    return dst


@pytest.mark.parametrize("question_template", [None, "Passage: {text}\nAsk about it."])
def test_the_teachers_order_is_its_answer_likelihoods(tmp_path, world_dir, chat_tokenizer_dir, question_template):
    """Eq. 8's order, built alone or taken out of the question-and-answer teacher's pass."""
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    teacher, _ = build_fit(["--config", str(config)]).model.teacher_generator()
    records = list(read_fid(world_dir / "dev.jsonl"))[:4]
    teacher.eval()
    orders = teacher_ranking.teacher_orders(teacher, records, question_template)
    assert len(orders) == 1 + (question_template is not None)
    for r, got in zip(records, orders["teacher, answer (eq. 8)"]):
        want = []
        for c in r["ctxs"]:  # one row at a time: no batch, no sort, no cache
            prompt = encode_prompts(teacher.tokenizer, [fill(teacher.template, r["question"], c)], teacher.max_length)
            labels = encode_answers(teacher.tokenizer, [r["answers"][0]], teacher.max_answer_length)
            with torch.no_grad():
                want.append(float(teacher.answer_loglik(prompt["input_ids"], prompt["attention_mask"], labels)))
        assert torch.allclose(got, torch.tensor(want), atol=1e-4)


def test_recall_row_reads_an_order(tmp_path, world_dir):
    records = list(read_fid(with_gold(world_dir / "test.jsonl", tmp_path / "test.jsonl")))
    labels = lambda r, key: [bool(c[key]) for c in r["ctxs"]]  # noqa: E731
    # an order that puts the last answer-holding context first and the gold one last
    order = []
    for r in records:
        s = -torch.arange(len(r["ctxs"]), dtype=torch.float)
        has = [j for j, h in enumerate(labels(r, "has_answer")) if h]
        if has:
            s[has[-1]] = 100.0
            s[has[0]] = -100.0 if len(has) > 1 else 100.0
        order.append(s)
    row = teacher_ranking.recall_row(order, records)
    with_answer = [len([c for c in r["ctxs"] if c["has_answer"]]) for r in records]
    assert row[0] == sum(n == 1 for n in with_answer) / len(records)  # gold first only where it is the one holder
    assert row[2] == sum(n >= 1 for n in with_answer) / len(records)  # a holder first wherever there is one
    assert row[4] == sum(n > 1 for n in with_answer) / len(records)  # a holder, not gold, first
    assert 0 < row[4] < row[2] < 1  # the tiny test split has questions with none, one and two holders


@pytest.mark.parametrize("question_template", ["none", "Passage: {text}\nAsk about it."])
def test_main_prints_a_row_per_order_and_file(
    tmp_path, monkeypatch, capsys, world_dir, chat_tokenizer_dir, question_template
):
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    data = with_gold(world_dir / "dev.jsonl", tmp_path / "dev.jsonl")
    argv = ["teacher_ranking.py", "--config", str(config), "--files", str(data), "--questions", "2", "--contexts", "4"]
    monkeypatch.setattr(sys, "argv", argv + ["--question-template", question_template])
    teacher_ranking.main()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {data} |")]
    orders = ["teacher, answer (eq. 8)"] + ["teacher, question and answer"] * (question_template != "none")
    assert [line.split("|")[2].strip() for line in lines] == orders + ["BM25"]
