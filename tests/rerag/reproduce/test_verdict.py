import numpy as np
import pytest

from rerag.reproduce import document, paper_numbers
from rerag.reproduce.verdict import (
    INCONCLUSIVE,
    NO,
    PARTLY,
    UNTESTABLE,
    YES,
    Difference,
    by_direction,
    combined,
    f1_of_rows,
    kendall_tau_of_rows,
    paired_difference,
    pooled_difference,
    untestable,
)


def test_a_clear_paired_gain_is_reproduced_and_its_interval_excludes_zero():
    rng = np.random.default_rng(0)
    before = rng.integers(0, 2, 200)
    after = np.where(rng.random(200) < 0.4, 1, before)  # turns some wrong answers right, none the other way
    gain = paired_difference(after, before, scale=100)
    assert gain.value == pytest.approx(100 * (after - before).mean())
    assert 0 < gain.low < gain.value < gain.high
    assert by_direction("after minus before", gain).reproduced == YES
    verdict = by_direction("after minus before", gain, expected=-1, because="5 of 200 answers changed")
    assert verdict.reproduced == NO
    assert verdict.why == "the interval lies above 0, against the paper; 5 of 200 answers changed"


@pytest.mark.parametrize(
    "difference, expected, reproduced, why",
    [
        (Difference(2.0, 0.5, 3.5), 1, YES, "the interval lies above 0"),
        (Difference(-2.0, -3.0, -1.0), -1, YES, "the interval lies below 0"),
        (Difference(-2.0, -3.0, -1.0), 1, NO, "the interval lies below 0, against the paper"),
        (Difference(2.0, 0.5, 3.5), -1, NO, "the interval lies above 0, against the paper"),
        # either way the point estimate falls, an interval holding zero decides nothing
        (Difference(2.0, -1.0, 5.0), 1, INCONCLUSIVE, "the interval [-1, +5] holds 0 (the estimate above 0)"),
        (Difference(-2.0, -5.0, 1.0), 1, INCONCLUSIVE, "the interval [-5, +1] holds 0 (the estimate below 0)"),
        (Difference(0.0, -5.0, 5.0), 1, INCONCLUSIVE, "the interval [-5, +5] holds 0 (the estimate at 0)"),
        (Difference(0.0, 0.0, 0.0), 1, INCONCLUSIVE, "no difference on any question"),
    ],
)
def test_the_verdict_follows_the_interval_not_the_point_estimate(difference, expected, reproduced, why):
    verdict = by_direction("ours", difference, expected)
    assert (verdict.reproduced, verdict.why) == (reproduced, why)
    assert verdict.ours == f"ours: {difference}"


def test_a_difference_whose_interval_holds_zero_is_inconclusive():
    a, b = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 1]), np.array([0, 1, 1, 0, 0, 1, 1, 0, 1, 0])
    gain = paired_difference(a, b)
    assert gain.value == pytest.approx(0.1) and gain.low < 0 < gain.high
    assert by_direction("a minus b", gain).reproduced == INCONCLUSIVE


def test_seeds_are_pooled_by_resampling_questions_within_each_seed():
    rng = np.random.default_rng(1)
    a = [rng.integers(0, 2, 50), rng.integers(0, 2, 80)]
    b = [rng.integers(0, 2, 50), rng.integers(0, 2, 80)]
    pooled = pooled_difference(a, b, scale=100)
    assert pooled.value == pytest.approx(100 * np.concatenate([a[0] - b[0], a[1] - b[1]]).mean())
    assert pooled.low < pooled.value < pooled.high
    single = paired_difference(a[0], b[0], scale=100)
    assert pooled_difference(a[:1], b[:1], scale=100) == single  # one seed: the paired interval itself
    # two seeds that agree narrow the interval of one
    twice = pooled_difference([a[0], a[0]], [b[0], b[0]], scale=100)
    assert twice.value == pytest.approx(single.value) and twice.high - twice.low < single.high - single.low
    with pytest.raises(ValueError, match="as many seeds"):
        pooled_difference(a, b[:1])


def test_equal_samples_differ_by_exactly_nothing():
    same = paired_difference([1, 0, 1], [1, 0, 1])
    assert (same.value, same.low, same.high) == (0, 0, 0)
    with pytest.raises(ValueError, match="equal, non-empty"):
        paired_difference([1, 0], [1])


def test_a_statistic_over_rows_is_resampled_with_the_questions_paired():
    # rows of (predicted unanswerable, truly unanswerable): a catches every unanswerable set, b none
    labels = np.array([1, 0, 1, 0, 1, 0, 0, 1] * 5)
    a, b = np.stack([labels, labels], 1), np.stack([np.zeros_like(labels), labels], 1)
    assert f1_of_rows(a) == 1.0 and f1_of_rows(b) == 0.0
    diff = paired_difference(a, b, f1_of_rows, scale=100)
    assert diff.value == 100 and diff.low == diff.high == 100
    e2e = np.arange(40) % 3
    tau = paired_difference(np.stack([e2e, e2e], 1), np.stack([-e2e, e2e], 1), kendall_tau_of_rows)
    assert tau.value == pytest.approx(2.0) and tau.low > 0


def test_a_finding_of_several_parts_is_partly_reproduced_only_where_its_parts_disagree():
    yes = by_direction("first", Difference(1.0, 0.5, 1.5))
    no = by_direction("second", Difference(-1.0, -1.5, -0.5), because="3 sets against 5")
    both = combined(yes, no)
    assert both.reproduced == PARTLY and both.ours.startswith("first") and "second" in both.ours
    assert both.why == (
        "first: yes (the interval lies above 0); second: no (the interval lies below 0, against the paper; 3 sets against 5)"
    )
    assert combined(yes, by_direction("again", Difference(2.0, 1.0, 3.0))).reproduced == YES
    assert combined(no, by_direction("again", Difference(-2.0, -3.0, -1.0))).reproduced == NO
    # a part not testable here leaves the verdict to the parts that are
    assert combined(yes, untestable("third", "why")).reproduced == YES
    assert combined(untestable("third", "why")).reproduced == UNTESTABLE


def test_the_verdict_table_lists_every_table_and_figure_of_the_three_papers():
    papers = paper_numbers()
    verdict = {"ours": "RE minus retriever: +5 [+2, +8]", "reproduced": YES, "why": ""}
    entry = {"command": "rerag reproduce re-rag table2", "scale": "toy", "seconds": 1.0, "runs": [], "seeds": []}
    entry |= {"markdown": "| ranking |", "data": {}, "figures": [], "differs": None, "verdict": verdict}
    text = document({"re-rag": {"table2": entry}}, "out")
    table = text.split("## Verdicts", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == sum(len(tables) for tables in papers.values()) >= 25
    for paper, tables in papers.items():
        for name, numbers in tables.items():
            assert numbers["finding"], f"{paper} {name}: no finding transcribed"
            assert sum(numbers["finding"] in row for row in rows) == 1
    assert sum("**not run yet**" in row for row in rows) == len(rows) - 1
    assert "| RE-RAG Table 2 |" in table and "+5 [+2, +8] | **yes** |" in table
