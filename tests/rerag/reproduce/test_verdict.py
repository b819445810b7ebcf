import numpy as np
import pytest

from rerag.reproduce import document, paper_numbers
from rerag.reproduce.verdict import (
    NO,
    PARTLY,
    UNTESTABLE,
    YES,
    Difference,
    by_direction,
    f1_of_rows,
    kendall_tau_of_rows,
    paired_difference,
    untestable,
    weakest,
)


def test_a_clear_paired_gain_is_reproduced_and_its_interval_excludes_zero():
    rng = np.random.default_rng(0)
    before = rng.integers(0, 2, 200)
    after = np.where(rng.random(200) < 0.4, 1, before)  # turns some wrong answers right, none the other way
    gain = paired_difference(after, before, scale=100)
    assert gain.value == pytest.approx(100 * (after - before).mean())
    assert 0 < gain.low < gain.value < gain.high
    assert by_direction("after minus before", gain).reproduced == YES
    verdict = by_direction("after minus before", gain, expected=-1, opposite_because="measured reason")
    assert verdict.reproduced == NO and verdict.why == "measured reason"


def test_a_difference_whose_interval_holds_zero_is_partly_reproduced():
    a, b = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 1]), np.array([0, 1, 1, 0, 0, 1, 1, 0, 1, 0])
    gain = paired_difference(a, b)
    assert gain.value == pytest.approx(0.1) and gain.low < 0 < gain.high
    verdict = by_direction("a minus b", gain)
    assert verdict.reproduced == PARTLY and "includes 0" in verdict.why
    assert by_direction("lower is the paper's", Difference(-2.0, -3.0, -1.0), expected=-1).reproduced == YES


def test_a_zero_difference_is_no_difference_not_the_opposite_direction():
    verdict = by_direction("a minus b", Difference(0.0, -5.0, 5.0))
    assert verdict.reproduced == NO and "point estimate is 0" in verdict.why and "opposite" not in verdict.why


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


def test_a_finding_of_several_parts_holds_as_far_as_its_weakest():
    yes = by_direction("first", Difference(1.0, 0.5, 1.5))
    no = by_direction("second", Difference(-1.0, -1.5, -0.5), opposite_because="because")
    both = weakest(yes, no)
    assert both.reproduced == NO and both.ours.startswith("first") and "second" in both.ours and both.why == "because"
    assert weakest(yes, untestable("third", "why")).reproduced == UNTESTABLE


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
