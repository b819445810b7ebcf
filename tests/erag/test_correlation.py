"""Kendall's tau and Spearman's rho between per-query metrics and end-to-end scores."""

import math

import pytest

from erag.correlation import correlate


def test_known_tau_and_rho():
    # Pairs: 5 concordant, 1 discordant -> tau = 4/6; rank differences (0, 1, 1, 0) -> rho = 1 - 6*2/(4*15).
    per_query = {q: {"P@1": x} for q, x in zip("abcd", [1, 2, 3, 4])}
    result = correlate(per_query, dict(zip("abcd", [1, 3, 2, 4])))
    assert result["P@1"]["kendall_tau"] == pytest.approx(2 / 3)
    assert result["P@1"]["spearman_rho"] == pytest.approx(0.8)


def test_an_undefined_correlation_says_why():
    result = correlate({q: {"MRR": 1.0} for q in "abc"}, {"a": 0.0, "b": 1.0, "c": 0.5})
    assert math.isnan(result["MRR"]["kendall_tau"]) and math.isnan(result["MRR"]["spearman_rho"])
    assert result["MRR"]["undefined"] == "the retrieval metric is constant (1) over the 3 queries"
    flat = correlate({q: {"MRR": x} for q, x in zip("abc", [0.0, 0.5, 1.0])}, dict.fromkeys("abc", 1.0))
    assert flat["MRR"]["undefined"] == "the end-to-end score is constant (1) over the 3 queries"
    assert correlate({"a": {"MRR": 1.0}}, {"a": 1.0})["MRR"]["undefined"].startswith("1 queries")
    assert correlate({q: {"P@1": x} for q, x in zip("ab", [0, 1])}, {"a": 0, "b": 1})["P@1"]["undefined"] is None


def test_query_sets_must_match():
    with pytest.raises(ValueError, match="different queries"):
        correlate({"a": {"P@1": 1.0}, "b": {"P@1": 0.0}}, {"a": 1.0, "c": 0.0})
