"""Downstream metrics E_M: containment accuracy, ROUGE-L, name lookup (EM and F1: test_answers.py)."""
import pytest

from erag.answers import exact_match
from erag.downstream import accuracy, get_downstream_metric, rouge_l


def test_accuracy_is_whole_token_containment():
    assert accuracy("I think it is Paris.", ["paris"]) == 1.0
    assert accuracy("Parisian", ["paris"]) == 0.0
    assert accuracy("SUPPORTS", ["supports"]) == 1.0


def test_rouge_l():
    assert rouge_l("the cat sat", ["the cat sat"]) == pytest.approx(1.0)
    assert 0.0 < rouge_l("the cat sat on a mat", ["a cat sat"]) < 1.0


def test_lookup_by_name_and_callable():
    assert get_downstream_metric("em") is exact_match
    custom = lambda prediction, references: 1.0  # noqa: E731
    assert get_downstream_metric(custom) is custom
    with pytest.raises(ValueError, match=r"unknown downstream metric 'bleu'.*'accuracy', 'em', 'f1', 'rougeL'"):
        get_downstream_metric("bleu")
