"""Retriever-inconsistency analysis: RWR, MRWR, MRLR (eqs. 1-3), the error decomposition
(section 3, appendix B) with per-error RWR (eq. 5), and the ensemble's oracle upper bound (figure 5)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from erag.answers import exact_match, normalize_answer


def _as_correct(correct) -> np.ndarray:
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[0] < 2:
        raise ValueError(
            f"expected a boolean [retrievers, questions] array with at least 2 retrievers, got {correct.shape}"
        )
    return correct


def _relative_win_ratio(error: np.ndarray, condition: np.ndarray | None = None, undefined: float = 0.0) -> np.ndarray:
    """RWR_E(i, j) = sum_n (1 - I_E^i(n)) I_E^j(n) c_ij(n) / sum_n I_E^j(n) c_ij(n) (eq. 5): the share
    of r_j's errors that r_i avoids, over the questions where c_ij (default 1) holds; `undefined`
    where the denominator is zero."""
    error = error.astype(float)
    condition = np.ones((len(error),) * 2 + error.shape[1:]) if condition is None else condition.astype(float)
    wins = np.einsum("in,jn,ijn->ij", 1.0 - error, error, condition)
    losses = np.einsum("jn,ijn->ij", error, condition)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(losses > 0, wins / np.where(losses > 0, losses, 1.0), undefined)


def rwr_matrix(correct) -> np.ndarray:
    """RWR(i, j) = sum_n I^i(n) (1 - I^j(n)) / sum_n (1 - I^j(n)) (eq. 1), [R, R].

    `correct` is boolean [retrievers, questions]. Entry (i, j) is the share of the questions r_j
    answers wrongly that r_i answers correctly. When r_j answers every question correctly the
    ratio is 0/0; it is 0 here: no question r_j fails can be won by r_i, so r_j "consistently
    outperforms" r_i, as figure 1 reads a 0 (and MRLR = 0 for a retriever that is never wrong).
    A retriever with no correct answer wins nothing: its row is 0. The diagonal is 0.
    """
    return _relative_win_ratio(~_as_correct(correct))


def mrwr(correct) -> np.ndarray:
    """MRWR(i) = 1/(M-1) sum_{j != i} RWR(i, j) (eq. 2), [R]: how often r_i wins where others fail."""
    rwr = rwr_matrix(correct)
    return (rwr.sum(1) - np.diag(rwr)) / (len(rwr) - 1)


def mrlr(correct) -> np.ndarray:
    """MRLR(i) = 1/(M-1) sum_{j != i} RWR(j, i) (eq. 3), [R]: how often r_i's failures are won by
    others; 0 means r_i consistently outperforms every other retriever."""
    rwr = rwr_matrix(correct)
    return (rwr.sum(0) - np.diag(rwr)) / (len(rwr) - 1)


def contains(document: str, text: str) -> bool:
    """`text ∈ d` of appendix B: the normalized tokens of `text` occur contiguously in those of `document`."""
    needle, haystack = normalize_answer(text).split(), normalize_answer(document).split()
    if not needle:
        return False
    return any(haystack[i : i + len(needle)] == needle for i in range(len(haystack) - len(needle) + 1))


ERRORS = ("retriever", "hallucination", "extraction", "lucky_guess")


@dataclass
class ErrorDecomposition:
    """Appendix B's per-example indicators on the kept questions and their RWR.

    kept: indices of the questions kept after the answer-length filter (N* of them).
    correct, indicators[E]: boolean [R, N*] for E in `ERRORS` (I_A, I_Er, I_Eh, I_Ee, I_Eluck).
    rates[E]: [R], the share of kept questions with E. rwr[E]: [R, R], RWR_E (eq. 5 and appendix B),
    -1 where undefined: no question on which r_j makes E under the condition (figure 4's -1,
    "at least one of the retrievers is free of this error").
    """

    kept: np.ndarray
    correct: np.ndarray
    indicators: dict[str, np.ndarray]
    rates: dict[str, np.ndarray]
    rwr: dict[str, np.ndarray]


def error_decomposition(
    answers: Sequence[Sequence[str]],
    documents: Sequence[Sequence[str]],
    gold: Sequence[Sequence[str]],
    correct=None,
    max_answer_words: int | None = 5,
) -> ErrorDecomposition:
    """Decompose each RALM's failures into retriever, hallucination and extraction errors and
    lucky guesses (eq. 4; appendix B).

    answers, documents: [R][N], each retriever's answer and the text it retrieved (what the
    reader read); gold: [N] lists of gold answers; correct: boolean [R, N] answer correctness
    (default: exact match with any gold answer; the paper used BEM).
    Indicators, with `a ∈ d` by `contains`:
      I_Er = no gold answer in d; I_Eh = answer not in d;
      I_Ee = (1 - I_Er)(1 - I_Eh)(1 - I_A); I_Eluck = I_Er I_Eh I_A.
    Questions on which any retriever's answer is longer than `max_answer_words` words are dropped
    for all retrievers, as the paper does (None keeps all). RWR_Ee counts only questions where
    neither retriever makes a retriever error; RWR_Eluck only those where both make retriever and
    hallucination errors (appendix B's condition, whose printed form repeats I_Er^j for I_Eh^j).
    """
    num_retrievers, num_questions = len(answers), len(gold)
    if len(documents) != num_retrievers or any(len(r) != num_questions for r in [*answers, *documents]):
        raise ValueError("answers and documents must both be [retrievers][questions] matching gold")
    if correct is None:
        correct = [[exact_match(a, golds) > 0 for a, golds in zip(row, gold)] for row in answers]
    correct = np.asarray(correct, dtype=bool).reshape(num_retrievers, num_questions)
    kept = np.array(
        [
            n
            for n in range(num_questions)
            if max_answer_words is None or all(len(row[n].split()) <= max_answer_words for row in answers)
        ],
        dtype=int,
    )
    pick = lambda rows: [[row[n] for n in kept] for row in rows]  # noqa: E731
    answers, documents, correct = pick(answers), pick(documents), correct[:, kept]
    gold = [gold[n] for n in kept]
    retriever = np.array(
        [[not any(contains(d, g) for g in golds) for d, golds in zip(row, gold)] for row in documents], bool
    )
    hallucination = np.array([[not contains(d, a) for a, d in zip(ar, dr)] for ar, dr in zip(answers, documents)], bool)
    hallucination = hallucination.reshape(retriever.shape)
    indicators = {
        "retriever": retriever,
        "hallucination": hallucination,
        "extraction": ~retriever & ~hallucination & ~correct,
        "lucky_guess": retriever & hallucination & correct,
    }
    no_retriever_error = ~retriever[:, None] & ~retriever[None, :]
    both_guessing = (retriever & hallucination)[:, None] & (retriever & hallucination)[None, :]
    conditions = {
        "retriever": None,
        "hallucination": None,
        "extraction": no_retriever_error,
        "lucky_guess": both_guessing,
    }
    return ErrorDecomposition(
        kept=kept,
        correct=correct,
        indicators=indicators,
        rates={e: i.mean(1) if i.shape[1] else np.zeros(num_retrievers) for e, i in indicators.items()},
        rwr={e: _relative_win_ratio(indicators[e], conditions[e], undefined=-1.0) for e in ERRORS},
    )


def oracle_upper_bound(correct, max_combinations: int | None = None, seed: int = 0) -> dict[int, np.ndarray]:
    """The ensemble's upper bound with a perfect voter (section 4, figure 5).

    For each pool size k = 1..R, the accuracy of every k-retriever subset when a question counts
    as solved if any retriever in the subset answers it. `max_combinations` caps the subsets per
    size by sampling them without replacement. Returns {k: accuracies}.
    """
    correct = np.asarray(correct, dtype=bool)
    num_retrievers = len(correct)
    rng = np.random.default_rng(seed)
    bounds = {}
    for size in range(1, num_retrievers + 1):
        total = math.comb(num_retrievers, size)
        if max_combinations is None or total <= max_combinations:
            subsets = itertools.combinations(range(num_retrievers), size)
        else:
            picked: set[tuple[int, ...]] = set()
            while len(picked) < max_combinations:
                picked.add(tuple(sorted(rng.choice(num_retrievers, size, replace=False).tolist())))
            subsets = sorted(picked)
        bounds[size] = np.array([correct[list(s)].any(0).mean() for s in subsets])
    return bounds
