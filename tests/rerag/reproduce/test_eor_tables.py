"""EoR's verdicts (`rerag.reproduce.eor_tables`) on hand-made reports: each table's verdict and its
reason follow the numbers, nothing trained."""

import numpy as np
import pytest

from eor.analysis import mrlr, oracle_upper_bound, rwr_matrix
from rerag.reproduce import eor_tables
from rerag.reproduce.verdict import INCONCLUSIVE, NO, PARTLY, UNTESTABLE, YES


def report(
    correct: dict[str, list[int]],
    eor: list[int],
    f1: dict[str, list[float]] | None = None,
    train: dict[str, list[int]] | None = None,
    retriever_weights: dict[str, float] | None = None,
    error_rwr: list[list[float]] | None = None,
    error_rates: dict[str, float] | None = None,
) -> dict:
    """An `EoRReport.to_dict()` of the fields the verdicts read, from per-question correctness (0/1)
    of each retriever (BM25@5, Dense@5, ReFree) and of EoR on the test split; F1 defaults to the EM."""
    names = list(correct)
    rows = np.array([correct[n] for n in names], dtype=bool)
    with_eor = np.vstack([rows, np.array(eor, dtype=bool)[None]])
    f1 = f1 or {**correct, "EoR": eor}
    return {
        "retriever_em": {n: 100 * float(np.mean(correct[n])) for n in names},
        "retriever_f1": {n: 100 * float(np.mean(f1[n])) for n in names},
        "eor_em": 100 * float(np.mean(eor)),
        "eor_f1": 100 * float(np.mean(f1["EoR"])),
        "test_em": {**{n: [float(v) for v in correct[n]] for n in names}, "EoR": [float(v) for v in eor]},
        "test_f1": f1,
        "test_correct": {n: row.tolist() for n, row in zip([*names, "EoR"], with_eor)},
        "train_em": train if train is not None else {},
        "mrlr_pool": dict(zip(names, mrlr(rows).tolist())),
        "mrlr_with_eor": dict(zip([*names, "EoR"], mrlr(with_eor).tolist())),
        "rwr": rwr_matrix(with_eor).tolist(),
        "upper_bound": {str(k): 100 * float(v.mean()) for k, v in oracle_upper_bound(rows).items()},
        "error_rwr": {"retriever": error_rwr or [[0, 0.5, 0], [0.4, 0, 0], [0, 0, 0]]},
        "error_rates": {"retriever": error_rates or {"BM25@5": 30.0, "Dense@5": 40.0, "ReFree": 100.0}},
        "weights": {
            "retrievers": retriever_weights or {"BM25@5": 0.5, "Dense@5": 0.4, "ReFree": 0.0},
            "metrics": {"em": 0.3, "f1": 0.3},
            "threshold": 0.1,
        },
        "num_train": len(next(iter(train.values()))) if train else 0,
        "num_test": len(eor),
    }


def repeat(pattern: list[int], times: int = 20) -> list[int]:
    return pattern * times


# 80 test questions: BM25 and Dense each right on 40, each on 20 the other misses; ReFree never right.
BM25 = repeat([1, 1, 0, 0])
DENSE = repeat([1, 0, 1, 0])
NEVER = repeat([0, 0, 0, 0])
EOR_WINS = repeat([1, 1, 1, 0])  # EoR picks the right one of the two wherever one is right
EOR_LOSES = repeat([1, 0, 0, 0])


def test_table1_eor_against_top_r_in_accuracy_and_mrlr():
    wins = eor_tables.table1_verdict(report({"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}, EOR_WINS))
    loses = eor_tables.table1_verdict(report({"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}, EOR_LOSES))
    assert wins.reproduced == YES and loses.reproduced == NO
    assert "EoR scores higher on 20 questions, Top R (BM25@5) on 0, of 80" in wins.why
    assert "Top R (BM25@5) on 20, of 80" in loses.why and "against the paper" in loses.why
    assert wins.why != loses.why


def test_table2_tests_the_drift_from_the_search_split_to_test():
    pool = {"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}
    drifting = report(
        pool, EOR_WINS, train={"BM25@5": repeat([1, 1]), "Dense@5": repeat([1, 0]), "ReFree": repeat([0, 0])}
    )
    verdict = eor_tables.table2_verdict(drifting)
    # BM25 leads dev at 100 EM and falls to 50 on test, where it ties Dense (the first of equals leads)
    assert "BM25@5: 100.0 EM on 40 dev questions, 50.0 on 80 test questions" in verdict.why
    assert "BM25@5 leads the search split (100.0 EM) and ties Dense@5 for the lead on test (50.0)" in verdict.why
    assert verdict.reproduced == PARTLY

    swapped = report(
        {"BM25@5": repeat([1, 0, 0, 0]), "Dense@5": DENSE, "ReFree": NEVER},
        EOR_WINS,
        train={"BM25@5": repeat([1, 1, 1, 0]), "Dense@5": repeat([1, 0, 0, 0]), "ReFree": NEVER},
    )
    moved = eor_tables.table2_verdict(swapped)
    assert moved.reproduced == YES
    assert "BM25@5 leads the search split (75.0 EM) but Dense@5 leads test (50.0 against 25.0)" in moved.why

    steady = report(pool, EOR_WINS, train={"BM25@5": BM25, "Dense@5": repeat([1, 0, 0, 0]), "ReFree": NEVER})
    held = eor_tables.table2_verdict(steady)
    # no drift: the interval holds 0, and BM25 ties Dense for the lead on test
    assert held.reproduced == PARTLY and "50.0 EM on 80 dev questions, 50.0 on 80" in held.why
    assert f"the search split's best: {INCONCLUSIVE} (the interval" in held.why and "holds 0" in held.why
    assert len({verdict.why, moved.why, held.why}) == 3

    loaded = eor_tables.table2_verdict(report(pool, EOR_WINS))
    assert loaded.reproduced == UNTESTABLE and "0 questions" in loaded.why


def test_table4_shows_em_and_f1_against_top_r_and_refree():
    pool = {"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}
    same_f1 = eor_tables.table4_verdict(report(pool, EOR_WINS))
    assert same_f1.reproduced == YES
    assert same_f1.ours.count("test EM") == 2 and same_f1.ours.count("test F1") == 2

    # EoR right more often, but its F1 below Top R's: the paper's Llama2-chat_13B rows
    f1 = {"BM25@5": repeat([1.0, 1.0, 0.5, 0.5]), "Dense@5": DENSE, "ReFree": NEVER, "EoR": repeat([1, 0.2, 0.2, 0])}
    lower_f1 = eor_tables.table4_verdict(report(pool, EOR_WINS, f1=f1))
    assert lower_f1.reproduced == PARTLY
    assert "EoR minus Top R (BM25@5), test F1: no" in lower_f1.why
    assert "EoR scores higher on 0 questions, Top R (BM25@5) on 60, of 80" in lower_f1.why
    assert same_f1.why != lower_f1.why


def test_figure1_sets_refree_aside_when_the_readers_own_knowledge_is_empty():
    pool = {"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}
    empty = eor_tables.figure1_verdict(report(pool, EOR_WINS))
    assert empty.reproduced == YES  # the retrievers' one pair wins both ways; ReFree's pairs not testable
    assert "the smallest RWR of a pair is 0.50 (BM25@5/Dense@5 0.50/0.50)" in empty.why
    assert "ReFree right on 0 of 80 test questions" in empty.ours

    knows = eor_tables.figure1_verdict(report({**pool, "ReFree": repeat([0, 0, 0, 1])}, EOR_WINS))
    assert knows.reproduced == YES and "ReFree and the retrievers: 2 of 2 pairs" in knows.ours

    nested = eor_tables.figure1_verdict(report({**pool, "Dense@5": repeat([1, 0, 0, 0])}, EOR_WINS))
    assert nested.reproduced == NO and "one-way: BM25@5/Dense@5 0.33/0.00" in nested.why
    assert len({empty.why, knows.why, nested.why}) == 3


def test_figure2_tests_the_papers_16_percent():
    high = report({"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}, EOR_WINS)
    above = eor_tables.figure2_verdict({"RE-RAG generator": high})
    # each retriever wins half of the other's failures: 50%, and 25% with ReFree's zeros among the others
    assert above.reproduced == YES
    assert (
        above.why
        == "the lowest, RE-RAG generator's, is 50.0%, above the paper's 16% (with ReFree among the others: 25.0%)"
    )
    assert "RE-RAG generator 50.0%" in above.ours

    # Dense's 4 failures in 10 include one BM25 wins (25%); BM25's 3 none Dense wins (0%): mean 12.5%
    low = report(
        {"BM25@5": repeat([1] * 7 + [0] * 3, 8), "Dense@5": repeat([1] * 6 + [0] * 4, 8), "ReFree": NEVER}, EOR_WINS
    )
    below = eor_tables.figure2_verdict({"RE-RAG generator": high, "an LLM": low})
    assert below.reproduced == NO
    assert below.why.startswith("the lowest, an LLM's, is 12.5%, at or below the paper's 16%")
    assert above.why != below.why


def test_figure3_names_the_order_of_the_one_world():
    first = eor_tables.figure3_verdict(report({"BM25@5": BM25, "Dense@5": EOR_LOSES, "ReFree": NEVER}, EOR_WINS))
    second = eor_tables.figure3_verdict(report({"BM25@5": EOR_LOSES, "Dense@5": BM25, "ReFree": NEVER}, EOR_WINS))
    assert first.reproduced == second.reproduced == UNTESTABLE
    assert "(BM25@5 > Dense@5 > ReFree on its 80 test questions)" in first.why
    assert "(Dense@5 > BM25@5 > ReFree" in second.why
    tied = eor_tables.figure3_verdict(report({"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}, EOR_WINS))
    assert "(BM25@5 = Dense@5 > ReFree" in tied.why


def test_figure4_sets_refree_aside_it_reads_no_document():
    pool = {"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}
    both = eor_tables.figure4_verdict(report(pool, EOR_WINS))
    assert both.reproduced == YES and "BM25@5/Dense@5 0.50/0.40" in both.why
    assert "ReFree's rate 100%" in both.ours
    one_way = eor_tables.figure4_verdict(report(pool, EOR_WINS, error_rwr=[[0, 0.62, 0], [0, 0, 0], [0, 0, 0]]))
    assert one_way.reproduced == NO and "one-way: BM25@5/Dense@5 0.62/0.00" in one_way.why
    free = eor_tables.figure4_verdict(
        report(
            pool,
            EOR_WINS,
            error_rwr=[[0, -1, 0], [0.3, 0, 0], [0, 0, 0]],
            error_rates={"BM25@5": 0.0, "Dense@5": 10.0, "ReFree": 100.0},
        )
    )
    assert free.reproduced == UNTESTABLE and "BM25@5 makes no retriever error" in free.why


def test_figure5_oracle_above_the_best_and_rising():
    pool = {"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}
    rising = eor_tables.figure5_verdict(report(pool, EOR_WINS))
    assert rising.reproduced == YES
    assert "the oracle is right on 60 of 80 questions, BM25@5 on 40" in rising.why
    assert "never falls, from 33.3 at size 1 to 75.0 at size 3" in rising.why
    same = eor_tables.figure5_verdict(report({**pool, "Dense@5": BM25}, EOR_WINS))
    assert same.reproduced == PARTLY and "no difference on any question" in same.why
    falling = report(pool, EOR_WINS)
    falling["upper_bound"]["3"] = 50.0
    fell = eor_tables.figure5_verdict(falling)
    assert fell.reproduced == PARTLY and "falls from 58.3 at size 2 to 50.0 at size 3" in fell.why


def test_figure6_counts_the_retrievers_the_weights_keep():
    pool = {"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER}
    train = {"BM25@5": repeat([1, 1, 0]), "Dense@5": repeat([1, 0, 0]), "ReFree": repeat([0, 0, 0])}
    sparse = eor_tables.figure6_verdict(report(pool, EOR_WINS, train=train))
    assert sparse.reproduced == YES and "2 of 3" in sparse.ours
    assert "1 at or below t: ReFree 0.000" in sparse.why
    assert "dev EM of those kept: BM25@5 66.7, Dense@5 33.3 (the pool's best 66.7)" in sparse.why
    dense = eor_tables.figure6_verdict(
        report(pool, EOR_WINS, retriever_weights={"BM25@5": 0.5, "Dense@5": 0.4, "ReFree": 0.3})
    )
    assert dense.reproduced == NO and "the lightest, ReFree, 0.300" in dense.why


@pytest.mark.parametrize(
    "verdict",
    [
        eor_tables.table1_verdict,
        eor_tables.table2_verdict,
        eor_tables.table4_verdict,
        eor_tables.figure1_verdict,
        lambda one: eor_tables.figure2_verdict({"RE-RAG generator": one}),
        eor_tables.figure3_verdict,
        eor_tables.figure4_verdict,
        eor_tables.figure5_verdict,
        eor_tables.figure6_verdict,
    ],
)
def test_every_reason_follows_the_numbers(verdict):
    """No fixed-string reason: the same table on two sets of numbers gives two different reasons."""
    a = report(
        {"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER},
        EOR_WINS,
        train={"BM25@5": BM25, "Dense@5": DENSE, "ReFree": NEVER},
    )
    b = report(
        {"BM25@5": repeat([1, 1, 1, 0]), "Dense@5": repeat([0, 1, 0, 1]), "ReFree": repeat([0, 0, 0, 1])},
        EOR_LOSES,
        train={"BM25@5": repeat([1, 0]), "Dense@5": repeat([1, 1, 1, 0]), "ReFree": NEVER},
        error_rwr=[[0, 0.2, 0], [0.7, 0, 0], [0, 0, 0]],
        error_rates={"BM25@5": 20.0, "Dense@5": 35.0, "ReFree": 100.0},
        retriever_weights={"BM25@5": 0.6, "Dense@5": 0.05, "ReFree": 0.02},
    )
    assert verdict(a).why != verdict(b).why
