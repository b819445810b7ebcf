"""benchmarks/window_pooling.py: each pooling ranks a question's passages from the same window scores."""

import importlib.util
from pathlib import Path

import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("window_pooling", BENCHMARKS / "window_pooling.py")
window_pooling = importlib.util.module_from_spec(spec)
spec.loader.exec_module(window_pooling)


def record(words: list[int], gold: int) -> dict:
    ctxs = [
        {"title": "", "text": " ".join(["w"] * n), "gold": j == gold, "has_answer": j == gold}
        for j, n in enumerate(words)
    ]
    return {"id": "q", "question": "q?", "answers": ["w"], "ctxs": ctxs}


def test_the_max_rewards_a_long_passages_many_windows_and_the_mean_does_not():
    # passage 0: long, three windows, one of them strong; passage 1: the gold, one good window
    records = [record([120, 60], gold=1)]
    scored = [(torch.tensor([0.0, 3.0, 0.0, 2.0]), torch.tensor([0, 0, 0, 1]))]
    by_max = window_pooling.pooled_ranks(records, scored, "max")
    by_mean = window_pooling.pooled_ranks(records, scored, "mean")
    by_first = window_pooling.pooled_ranks(records, scored, "first")
    assert (by_max["gold"], by_max["pick longer"]) == ([2], [True])
    assert (by_mean["gold"], by_mean["pick longer"]) == ([1], [])
    assert by_first["gold"] == [1]
    assert window_pooling.retriever_ranks(records)["gold"] == [2]


def test_the_table_gives_each_order_its_recall_and_the_paired_difference():
    records = [record([120, 60], gold=1), record([60, 60], gold=0)]
    scored = [
        (torch.tensor([0.0, 3.0, 0.0, 2.0]), torch.tensor([0, 0, 0, 1])),  # max misses, mean hits
        (torch.tensor([1.0, 0.0]), torch.tensor([0, 1])),  # every pooling hits
    ]
    rows = window_pooling.table("f", records, scored, ks=[1], resamples=50)
    assert [r.split(" | ")[1] for r in rows] == ["BM25", "max", "mean", "first"]
    assert rows[0].startswith("| f | BM25 | 0.500 |")
    assert rows[1].startswith("| f | max | 0.500 (+0.000 ") and rows[1].endswith("| 1 of 1 |")
    assert rows[2].startswith("| f | mean | 1.000 (+0.500 ") and " | 1.000 (+0.500 " in rows[2]  # vs BM25, vs max
