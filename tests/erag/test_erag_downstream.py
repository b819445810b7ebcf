"""Downstream metrics E_M: SQuAD EM/F1, containment accuracy, ROUGE-L, name lookup."""
import pytest

from erag.downstream import accuracy, exact_match, get_downstream_metric, normalize_answer, rouge_l, token_f1


def test_squad_normalization():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("a Cat and AN apple") == "cat and apple"


def test_exact_match_takes_best_reference():
    assert exact_match("the Paris.", ["London", "paris"]) == 1.0
    assert exact_match("Paris, France", ["paris"]) == 0.0


def test_token_f1():
    # prediction tokens {paris, france}, reference {paris}: P = 1/2, R = 1 -> F1 = 2/3
    assert token_f1("Paris France", ["Paris", "Berlin"]) == pytest.approx(2 / 3)
    assert token_f1("", ["x"]) == 0.0


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
