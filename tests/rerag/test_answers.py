from rerag.data.answers import exact_match, has_answer, normalize_answer


def test_squad_normalization():
    assert normalize_answer("  The Quorvik-City! ") == "quorvikcity"
    assert exact_match("the city of Soltha", ["City of Soltha."])
    assert not exact_match("Soltha", ["the city of Soltha"])


def test_dpr_has_answer_matches_whole_tokens():
    assert has_answer(["Soltha"], "He was born in Soltha, in the north.")
    assert not has_answer(["Solt"], "He was born in Soltha.")
    assert has_answer(["New Varen", "x"], "from new varen")
