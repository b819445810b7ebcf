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


def test_constant_metric_gives_nan():
    result = correlate({q: {"MRR": 1.0} for q in "abc"}, {"a": 0.0, "b": 1.0, "c": 0.5})
    assert math.isnan(result["MRR"]["kendall_tau"]) and math.isnan(result["MRR"]["spearman_rho"])


def test_query_sets_must_match():
    with pytest.raises(ValueError, match="different queries"):
        correlate({"a": {"P@1": 1.0}, "b": {"P@1": 0.0}}, {"a": 1.0, "c": 0.0})
