"""The one definition of answer text: SQuAD normalization, EM, token F1, DPR has-answer."""

import pytest

from erag.answers import exact_match, has_answer, normalize_answer, token_f1


def test_squad_normalization():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("a Cat and AN apple") == "cat and apple"
    assert normalize_answer("  The Quorvik-City! ") == "quorvikcity"


def test_exact_match_takes_best_reference():
    assert exact_match("the Paris.", ["London", "paris"]) == 1.0
    assert exact_match("Paris, France", ["paris"]) == 0.0
    assert exact_match("the city of Soltha", ["City of Soltha."]) == 1.0
    assert exact_match("x", []) == 0.0


def test_token_f1():
    # prediction tokens {paris, france}, reference {paris}: P = 1/2, R = 1 -> F1 = 2/3
    assert token_f1("Paris France", ["Paris", "Berlin"]) == pytest.approx(2 / 3)
    assert token_f1("the city of Paris", ["Paris city"]) == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    # SQuAD 2.0: an empty answer scores 1 against an empty reference and 0 against any other
    assert token_f1("", [""]) == 1.0 and token_f1("", ["x"]) == 0.0 and token_f1("a", ["Paris"]) == 0.0


def test_dpr_has_answer_matches_whole_tokens():
    assert has_answer("The Eiffel Tower is in Paris, France.", ["paris"])
    assert has_answer("He was born in Soltha, in the north.", ["Soltha"])
    assert not has_answer("He was born in Soltha.", ["Solt"])
    assert has_answer("from new varen", ["New Varen", "x"])
    assert not has_answer("Parisian cafes", ["Paris"])
    assert has_answer("He scored 3-1 in extra time", ["3 - 1"])


def test_dpr_has_answer_keeps_accents_as_marks():
    assert not has_answer("Born in São Paulo.", ["Sao Paulo"])
    assert has_answer("Born in São Paulo.", ["são paulo"])


def test_swapped_arguments_fail_loudly():
    # Text first, gold strings second, everywhere: the swapped call is an error, not a wrong label.
    with pytest.raises(TypeError, match="passage must be a string"):
        has_answer(["Paris"], "Paris is in France")
    with pytest.raises(TypeError, match="references must be a list of strings"):
        exact_match("Paris", "Paris")
    with pytest.raises(TypeError, match="prediction must be a string"):
        token_f1(["Paris"], ["Paris"])
