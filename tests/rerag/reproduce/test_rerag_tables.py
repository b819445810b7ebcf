"""RE-RAG's verdicts computed from each table's numbers: hand-made numbers, nothing trained."""

import pytest

from rerag.reproduce.rerag_tables import (
    RAG_ROWS,
    components_verdict,
    normalization_verdict,
    reranks_better,
    threshold_comparison_verdict,
    thresholding_verdict,
)
from rerag.reproduce.verdict import INCONCLUSIVE, NO, PARTLY, YES

VAL = {"val/re_recall@1": 0.7, "val/retriever_recall@1": 0.2, "val/re_recall@10": 0.9, "val/retriever_recall@10": 0.8}


def gains(withheld: int, caught: int, unchanged: int) -> dict[str, float]:
    """Per question, accuracy after minus before thresholding: -1 withheld, +1 caught, 0 unchanged."""
    values = [-1.0] * withheld + [1.0] * caught + [0.0] * unchanged
    return {f"q{i}": v for i, v in enumerate(values)}


def test_table4_says_what_thresholding_withheld_and_caught():
    helped, hurt = thresholding_verdict(gains(2, 30, 68)), thresholding_verdict(gains(30, 2, 68))
    assert (helped.reproduced, hurt.reproduced) == (YES, NO)
    assert "2 right answers withheld, 30 unanswerable sets caught" in helped.why
    assert "30 right answers withheld, 2 unanswerable sets caught" in hurt.why
    assert thresholding_verdict(gains(3, 4, 93)).reproduced == INCONCLUSIVE


def test_table12_compares_each_confidences_gain_on_the_same_questions():
    verdict = threshold_comparison_verdict(gains(2, 30, 68), gains(30, 2, 68))
    assert verdict.reproduced == YES
    assert verdict.why.endswith(
        "the RE: 2 right answers withheld, 30 unanswerable sets caught; "
        "the cosine: 30 right answers withheld, 2 unanswerable sets caught"
    )
    assert threshold_comparison_verdict(gains(30, 2, 68), gains(2, 30, 68)).reproduced == NO


def test_table6_shows_each_use_of_the_re():
    n = 100
    right = {  # one seed
        "baseline": [[0.0] * n],
        "baseline + RE score": [[0.0] * n],  # no change: inconclusive
        "baseline + RE rerank": [[1.0] * 40 + [0.0] * 60],
        "baseline + RE rerank, score": [[1.0] * 50 + [0.0] * 50],
    }
    verdict = components_verdict(right, VAL)
    assert verdict.reproduced == PARTLY
    assert "baseline + RE score minus baseline, test EM: inconclusive" in verdict.why
    assert "baseline + RE rerank minus baseline, test EM: yes" in verdict.why
    assert "dev Recall@1 0.700 against the retriever's 0.200" in verdict.why
    right["baseline + RE score"] = [[1.0] * 30 + [0.0] * 70]
    every = components_verdict(right, {**VAL, "val/re_recall@1": 0.6})
    assert every.reproduced == YES and "dev Recall@1 0.600" in every.why


def test_table6_pools_its_seeds():
    """A gain one seed shows and two others do not is pooled into one interval over all three."""
    n = 60
    gain, none = [1.0] * 20 + [0.0] * 40, [0.0] * n
    right = {"baseline": [none] * 3, **{name: [gain, none, none] for name in RAG_ROWS[1:4]}}
    pooled = components_verdict(right, VAL)
    assert pooled.ours.count("+11.1 [") == 3  # 20 of 180 questions gained: 11.1 points
    assert components_verdict({k: v[:1] for k, v in right.items()}, VAL).ours.count("+33.3 [") == 3


def test_table7_reports_the_pairs_share_of_the_vocabulary():
    per_context = {"RE-RAG": [[0.4, 0.5, 0.45, 0.42]], "- normalization": [[0.001, 0.002, 0.001, 0.003]]}
    means = {"RE-RAG": {"pair_mass": 0.9}, "- normalization": {"pair_mass": 0.004}}
    verdict = normalization_verdict(per_context, means)
    assert verdict.reproduced == YES
    assert verdict.why.endswith("holds 90% of the vocabulary's mass with eq. 3, 0.4% without")
    flipped = normalization_verdict(
        {"RE-RAG": per_context["- normalization"], "- normalization": per_context["RE-RAG"]}, means
    )
    assert flipped.reproduced == NO


@pytest.mark.parametrize("re_first, expected", [(True, YES), (False, NO)])
def test_table2_pairs_the_re_with_the_retriever_and_the_pointwise_re(re_first, expected):
    def row(re: int, retriever: int) -> dict:
        return {"first_hit": {"re": {"has_answer": re}, "retriever": {"has_answer": retriever}}}

    first, later = (1, 5) if re_first else (5, 1)
    main = {f"q{i}": row(first, later) for i in range(40)}  # the RE's first hit against the retriever's
    pointwise = {f"q{i}": row(later, later) for i in range(40)}
    verdict = reranks_better(main, pointwise)
    assert verdict.reproduced == expected and verdict.ours.count("test R@1") == 2
