import numpy as np
import pytest

from rerag.infer.unanswerable import (
    THRESHOLDS,
    accuracy_by_set,
    classify,
    markdown,
    max_cosine,
    mixed_strategy,
    report,
    risk_coverage,
    search_threshold,
)

# Unanswerable sets at 0.55, 0.65, 0.75; answerable ones at 0.72, 0.85, 0.88, 0.95. Predicting
# "unanswerable" below t: t = 0.6 -> P 1, R 1/3, F1 0.5; 0.7 -> P 1, R 2/3, F1 0.8;
# 0.8 -> P 3/4, R 1, F1 6/7 (the best); 0.9 -> P 3/6, R 1, F1 2/3; 0.5 predicts nothing, F1 0.
CONFIDENCE = [0.55, 0.65, 0.75, 0.72, 0.85, 0.88, 0.95]
UNANSWERABLE = [True, True, True, False, False, False, False]


def test_threshold_search_finds_the_best_f1():
    best = search_threshold(CONFIDENCE, UNANSWERABLE)
    assert best.threshold == 0.8
    assert (best.precision, best.recall, best.f1) == pytest.approx((0.75, 1.0, 6 / 7))
    assert classify(CONFIDENCE, UNANSWERABLE, 0.5).f1 == 0.0
    assert THRESHOLDS == (0.5, 0.6, 0.7, 0.8, 0.9)


def test_ties_keep_the_lowest_threshold():
    # Every threshold from 0.6 to 0.9 catches the one unanswerable set and nothing else.
    assert search_threshold([0.55, 0.95, 0.99], [True, False, False]).threshold == 0.6


def records(answers, reader_answers, answerable, confidence):
    return [
        {"id": str(i), "answers": [a], "reader_answer": r, "answerable": o, "confidence": c}
        for i, (a, r, o, c) in enumerate(zip(answers, reader_answers, answerable, confidence))
    ]


def test_accuracy_before_and_after_thresholding():
    rows = records(
        answers=["Soltha", "Varen", "potter", "Kasol", "bees"],
        reader_answers=["Soltha", "Varen", "weaver", "Kasol", "honey"],
        answerable=[True, True, True, False, False],
        confidence=[0.9, 0.6, 0.5, 0.3, 0.95],
    )
    acc = accuracy_by_set(rows, threshold=0.7)
    o, x = acc["answerable (O)"], acc["unanswerable (X)"]
    # O: right, right, wrong before; abstaining on the 2nd (0.6) loses it; the 3rd was wrong anyway.
    assert (o.questions, o.before, o.after) == (3, pytest.approx(2 / 3), pytest.approx(1 / 3))
    # X: only "unanswerable" is right: none before; abstaining on "Kasol" (0.3) is right, "honey" (0.95) stays wrong.
    assert (x.questions, x.before, x.after) == (2, 0.0, 0.5)


def test_a_matching_guess_on_an_unanswerable_set_is_wrong():
    # No kept context holds the answer, yet the reader's guess matches it, confidently (0.9) and
    # not (0.2). Table 4's X column is classification accuracy: only abstaining counts.
    rows = records(
        answers=["Soltha", "Varen", "bees"],
        reader_answers=["Soltha", "Varen", "unanswerable"],
        answerable=[False, False, False],
        confidence=[0.9, 0.2, 0.8],
    )
    x = accuracy_by_set(rows, threshold=0.5)["unanswerable (X)"]
    assert (x.before, x.after) == (pytest.approx(1 / 3), pytest.approx(2 / 3))  # the old rule: 2/3 and 2/3


def test_report_has_tables_3_and_4_beside_the_all_unanswerable_baseline():
    dev = records(["a"] * 7, ["a"] * 7, [not u for u in UNANSWERABLE], CONFIDENCE)
    result = report(dev, dev)
    assert result["threshold"] == 0.8
    # calling all 7 unanswerable: precision 3/7, recall 1, F1 0.6
    assert result["table3"]["all_unanswerable"]["f1"] == pytest.approx(0.6)
    text = markdown(result)
    assert "| 0.8 (best) | 75.0 | 100.0 | 85.7 |" in text
    assert "| confidence < threshold | 7 | 3 | 75.0 | 100.0 | 85.7 |" in text  # Table 3 on "test"
    assert "| all unanswerable | 7 | 3 | 42.9 | 100.0 | 60.0 |" in text
    assert "| answerable (O) | 4 | 100.0 | 75.0 | -25.0 |" in text  # 0.72 < 0.8 abstains
    assert "| unanswerable (X) | 3 | 0.0 | 100.0 | +100.0 |" in text  # the reader's matching "a" is a guess
    with pytest.raises(ValueError, match="no gold answers"):
        report([{"id": "q1", "confidence": 0.5}], dev)


def test_risk_coverage_answers_the_most_confident_first():
    rows = records(
        answers=["a", "b", "c", "d"],
        reader_answers=["a", "x", "c", "d"],
        answerable=[True] * 4,
        confidence=[0.9, 0.8, 0.8, 0.1],
    )
    # 0.9: 1 of 1 right; the two at 0.8 enter together: 2 of 3; then all: 3 of 4
    assert risk_coverage(rows) == [
        {"threshold": 0.9, "coverage": 0.25, "em": 1.0},
        {"threshold": 0.8, "coverage": 0.75, "em": pytest.approx(2 / 3)},
        {"threshold": 0.1, "coverage": 1.0, "em": 0.75},
    ]


def test_the_mixed_strategy_takes_the_llm_answer_below_the_threshold():
    rows = records(
        answers=["Soltha", "Varen", "potter"],
        reader_answers=["Soltha", "Kasol", "weaver"],
        answerable=[True, False, True],
        confidence=[0.9, 0.2, 0.75],
    )
    table = mixed_strategy(rows, ["Mira", "Varen", "a potter"], threshold=0.8)
    assert table["to_llm"] == 2
    assert table["rerag"]["em"] == pytest.approx(1 / 3) and table["llm_alone"]["em"] == pytest.approx(2 / 3)
    assert table["mixed"]["em"] == 1.0  # reader on the first, the LLM on the two below 0.8
    with pytest.raises(ValueError, match="2 parametric answers for 3"):
        mixed_strategy(rows, ["a", "b"], 0.5)


def test_the_retrievers_set_confidence_is_the_best_cosine_clipped_to_0_1():
    q1, q2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    a, b, c = [0.6, 0.8], [1.0, 0.0], [0.0, -1.0]
    assert max_cosine(q1, np.array([a, b])) == pytest.approx(1.0)  # max(0.6, 1.0)
    assert max_cosine(q2, np.array([c])) == 0.0  # cosine -1 clipped to 0
    assert max_cosine(q2, np.array([a, b])) == pytest.approx(0.8)
    assert max_cosine(q1, np.zeros((0, 2))) == 0.0
