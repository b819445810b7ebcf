"""Downstream metrics E_M: FEVER label accuracy, ROUGE-L, name lookup (EM and F1: test_answers.py)."""

import pytest

from erag.answers import exact_match
from erag.downstream import accuracy, get_downstream_metric, rouge_l


def test_accuracy_is_fever_label_equality_across_spellings():
    for prediction in ["supports", "Supported", "SUPPORT", "SUPPORTS."]:
        assert accuracy(prediction, ["SUPPORTS"]) == 1.0
    for prediction in ["refutes", "Refuted", "REFUTE"]:
        assert accuracy(prediction, ["REFUTES"]) == 1.0
    for prediction in ["not enough info", "NEI", "NOT ENOUGH INFORMATION", "NOT_ENOUGH_INFO"]:
        assert accuracy(prediction, ["NOT ENOUGH INFO"]) == 1.0
    assert accuracy("SUPPORTS", ["supported"]) == 1.0  # gold spellings are normalized too
    assert accuracy("REFUTES", ["SUPPORTS"]) == 0.0


def test_accuracy_scores_a_non_label_prediction_zero_and_refuses_non_label_gold():
    # Containment would count these: the label occurs in the prediction, but the prediction is no label.
    assert accuracy("The claim SUPPORTS nothing; REFUTES", ["REFUTES"]) == 0.0
    assert accuracy("I think it is supported", ["SUPPORTS"]) == 0.0
    with pytest.raises(ValueError, match="FEVER label accuracy.*'Paris'"):
        accuracy("Paris", ["Paris"])


def test_rouge_l():
    assert rouge_l("the cat sat", ["the cat sat"]) == pytest.approx(1.0)
    assert 0.0 < rouge_l("the cat sat on a mat", ["a cat sat"]) < 1.0


def test_lookup_by_name_and_callable():
    assert get_downstream_metric("em") is exact_match
    custom = lambda prediction, references: 1.0  # noqa: E731
    assert get_downstream_metric(custom) is custom
    with pytest.raises(
        ValueError, match=r"unknown downstream metric 'bleu'.*'accuracy', 'contains', 'em', 'f1', 'rougeL'"
    ):
        get_downstream_metric("bleu")


def test_contains_credits_a_sentence_holding_a_gold_answer():
    contains = get_downstream_metric("contains")
    assert contains("I believe it was Mount Everest, in Nepal.", ["Everest"]) == 1.0
    assert get_downstream_metric("em")("I believe it was Mount Everest, in Nepal.", ["Everest"]) == 0.0
    assert contains("Evere st", ["Everest"]) == 0.0 and contains("the river", ["the Nile", "Nile"]) == 0.0
