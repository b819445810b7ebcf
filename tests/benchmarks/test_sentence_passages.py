"""benchmarks/sentence_passages.py: sentence-aligned passages of 60-120 words across paragraphs,
and each question's gold passage the one that holds its answer."""

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sentence_passages.py"
spec = importlib.util.spec_from_file_location("sentence_passages", SCRIPT)
sentence_passages = importlib.util.module_from_spec(spec)
sys.modules["sentence_passages"] = sentence_passages
spec.loader.exec_module(sentence_passages)


def sentence(i: int, words: int) -> str:
    return f"Fact {i} " + " ".join(f"w{i}x{j}" for j in range(words - 3)) + " end."


def squad() -> dict:
    first = " ".join(sentence(i, 25) for i in range(5))  # 125 words: one passage of 75, the rest carries over
    second = " ".join(sentence(i, 30) for i in range(5, 8)) + " The capital is Zorvia."
    qa = {"id": "q1", "question": "What is the capital?", "is_impossible": False}
    qa["answers"] = [{"text": "Zorvia", "answer_start": second.index("Zorvia")}]
    other = {"title": "Other", "paragraphs": [{"context": sentence(9, 70), "qas": []}]}
    return {
        "data": [
            {"title": "Land", "paragraphs": [{"context": first, "qas": []}, {"context": second, "qas": [qa]}]},
            other,
        ]
    }


def test_passages_are_sentence_aligned_and_cross_paragraphs():
    text, spans, _ = sentence_passages.passages(squad()["data"][0])
    words = [len(text[s:e].split()) for s, e in spans]
    assert words[:-1] and all(60 <= n <= 120 for n in words[:-1])
    assert all(text[s:e].rstrip().endswith(".") for s, e in spans)  # whole sentences
    assert any("\n" in text[s:e] for s, e in spans)  # a passage runs across a paragraph boundary


def test_gold_is_the_passage_with_the_answer():
    corpus, records = sentence_passages.build(squad(), ["Land"], k=10)
    assert len(records) == 1 and {c["title"] for c in corpus} == {"Land", "Other"}
    gold = [c for c in records[0]["ctxs"] if c["gold"]]
    assert len(gold) == 1 and "Zorvia" in gold[0]["text"] and gold[0]["has_answer"]
    assert not any(c["has_answer"] for c in records[0]["ctxs"] if not c["gold"])
