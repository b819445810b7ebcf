import numpy as np
import pytest

from eor import contains, error_decomposition, mrlr, mrwr, oracle_upper_bound, rwr_matrix

# Four retrievers x six questions; r2 is never right, r3 never wrong.
CORRECT = np.array(
    [
        [1, 1, 1, 1, 0, 0],
        [1, 0, 1, 0, 1, 0],
        [0, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 1],
    ],
    dtype=bool,
)


def test_rwr_matrix_by_hand():
    expected = np.array(
        [
            [0, 2 / 3, 4 / 6, 0],  # r0 wins 2 of r1's 3 failures, 4 of r2's 6; r3 never fails (0/0 -> 0)
            [1 / 2, 0, 3 / 6, 0],
            [0, 0, 0, 0],  # a retriever with no right answer wins nothing
            [2 / 2, 3 / 3, 6 / 6, 0],
        ]
    )
    np.testing.assert_allclose(rwr_matrix(CORRECT), expected)


def test_mrwr_and_mrlr_by_hand():
    np.testing.assert_allclose(mrwr(CORRECT), [4 / 9, 1 / 3, 0, 1])
    np.testing.assert_allclose(mrlr(CORRECT), [1 / 2, 5 / 9, 13 / 18, 0])  # never wrong -> MRLR 0


def test_one_retriever_is_refused():
    with pytest.raises(ValueError, match="at least 2 retrievers"):
        mrlr(CORRECT[:1])


def test_contains_matches_whole_normalized_tokens():
    assert contains("The Nile flows north.", "nile") and contains("in the Nile, Egypt", "the Nile")
    assert not contains("The Nile", "Nil") and not contains("anything", "")


def test_error_decomposition_counts_each_constructed_case():
    gold = [["Paris"], ["Rome"], ["Nile"], ["Everest"]]
    documents = [
        ["Paris is the capital of France", "Rome and Milan are cities", "", "Everest is high"],
        ["Berlin is in Germany", "Rome is the capital", "Amazon river", "Everest is high"],
    ]
    answers = [
        ["Paris", "Milan", "the Nile", "Everest"],  # correct; extraction error; lucky guess
        ["Berlin", "Venice", "Congo", "the answer to the question is Everest"],  # retriever; hallucination; both
    ]
    result = error_decomposition(answers, documents, gold)
    assert result.kept.tolist() == [0, 1, 2]  # question 3 has a 7-word answer
    assert result.correct.astype(int).tolist() == [[1, 0, 1], [0, 0, 0]]
    got = {e: i.astype(int).tolist() for e, i in result.indicators.items()}
    assert got == {
        "retriever": [[0, 0, 1], [1, 0, 1]],
        "hallucination": [[0, 0, 1], [0, 1, 1]],
        "extraction": [[0, 1, 0], [0, 0, 0]],
        "lucky_guess": [[0, 0, 1], [0, 0, 0]],
    }
    np.testing.assert_allclose(result.rates["retriever"], [1 / 3, 2 / 3])
    np.testing.assert_allclose(result.rwr["retriever"], [[0, 1 / 2], [0, 0]])
    np.testing.assert_allclose(result.rwr["hallucination"], [[0, 1 / 2], [0, 0]])
    # Extraction: only question 1 has no retriever error for both; r1 makes none there (-1).
    np.testing.assert_allclose(result.rwr["extraction"], [[0, -1], [1, -1]])
    # Lucky guess: only question 2 has retriever and hallucination errors for both.
    np.testing.assert_allclose(result.rwr["lucky_guess"], [[0, -1], [1, -1]])
    assert error_decomposition(answers, documents, gold, max_answer_words=None).kept.tolist() == [0, 1, 2, 3]


def test_oracle_upper_bound_for_every_pool_size():
    bounds = oracle_upper_bound(CORRECT)
    assert sorted(bounds) == [1, 2, 3, 4]
    np.testing.assert_allclose(bounds[1], [4 / 6, 3 / 6, 0, 1])
    np.testing.assert_allclose(bounds[2], [5 / 6, 4 / 6, 1, 3 / 6, 1, 1])  # (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)
    np.testing.assert_allclose(bounds[4], [1])
    assert [len(v) for v in oracle_upper_bound(CORRECT, max_combinations=2).values()] == [2, 2, 2, 1]
