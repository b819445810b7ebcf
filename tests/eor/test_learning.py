import numpy as np
import pytest
import torch

from eor import ExactMatch, SearchConfig, TokenF1, Voter, VoterWeights, learn_weights, similarity_tensor, voter_accuracy


def noisy_pool(num_questions=150, seed=0):
    """Retriever 0 always answers correctly; retrievers 1-3 are right 40% of the time and otherwise
    answer one of two wrong answers, so they often outvote retriever 0 together."""
    rng = np.random.default_rng(seed)
    gold = [f"answer {i}" for i in range(num_questions)]
    rows = [list(gold)] + [[g if rng.random() < 0.4 else f"wrong {rng.integers(2)}" for g in gold] for _ in range(3)]
    correct = np.array([[a == g for a, g in zip(row, gold)] for row in rows])
    return rows, correct, similarity_tensor(rows, [ExactMatch(), TokenF1()])


# Accuracy 1.0 needs every noisy retriever at or below t: an excluded retriever still votes in the
# others' pools (section 4.2, eq. 7), so a noisy retriever left above t wins whenever the noisy ones
# agree on a wrong answer. The accuracy is flat around that corner of the box: the centre start's
# simplex drops each weight to 0 but one at a time, and the search reaches the corner from the
# default (seeded) random restarts, helped by the tie-break toward fewer retrievers.
SEARCH = SearchConfig()


def test_nelder_mead_selects_the_only_reliable_retriever(tmp_path):
    rows, correct, sim = noisy_pool()
    uniform = voter_accuracy(sim, torch.as_tensor(correct), torch.full((2,), 0.3), torch.full((4,), 0.3))
    assert uniform < 0.9  # majority agreement alone is misled here

    weights, accuracy = learn_weights(sim, correct, ["em", "f1"], ["good", "n1", "n2", "n3"], SEARCH)
    assert accuracy == 1.0
    values = [*weights.metrics.values(), *weights.retrievers.values()]
    assert all(0.0 <= w <= 0.6 for w in values)
    assert max(weights.retrievers, key=weights.retrievers.get) == "good"
    assert (weights.threshold, weights.pooling) == (0.1, "mean")

    voter = Voter([ExactMatch(), TokenF1()], weights)
    assert voter.vote(dict(zip(weights.retrievers, rows))) == rows[0]
    weights.save(tmp_path / "weights.json")
    assert VoterWeights.load(tmp_path / "weights.json") == weights


def test_learned_weights_generalize_to_new_questions():
    _, train_correct, train_sim = noisy_pool(seed=1)
    test_rows, _, test_sim = noisy_pool(seed=2)
    weights, _ = learn_weights(train_sim, train_correct, ["em", "f1"], ["good", "n1", "n2", "n3"], SEARCH)
    answers = Voter([ExactMatch(), TokenF1()], weights).vote(dict(zip(weights.retrievers, test_rows)))
    assert answers == test_rows[0]


def test_shapes_are_checked():
    _, correct, sim = noisy_pool(10)
    with pytest.raises(ValueError, match="do not match"):
        learn_weights(sim, correct[:3], ["em", "f1"], ["a", "b", "c", "d"])


def test_a_useless_retriever_is_dropped_below_the_threshold():
    """A hand-made sparse optimum (Figure 6's sparse weights, section 4.4): "good" is always right,
    "echo" answers as "good" does, "mute" answers what no one else does and is never right. The
    accuracy is 1.0 whatever mute's weight (its pooled agreement is 0, it is never chosen), so
    only the tie-break toward fewer retrievers moves it from the start's 0.3 to below t."""
    gold = [f"answer {i}" for i in range(40)]
    rows = [gold, list(gold), [f"nothing {i + 1000}" for i in range(40)]]
    correct = np.array([[a == g for a, g in zip(row, gold)] for row in rows])
    sim = similarity_tensor(rows, [ExactMatch(), TokenF1()])
    start = voter_accuracy(sim, torch.as_tensor(correct), torch.full((2,), 0.3), torch.full((3,), 0.3))
    assert start == 1.0  # the centre start is already optimal: nothing but the tie-break moves mute

    weights, accuracy = learn_weights(sim, correct, ["em", "f1"], ["good", "echo", "mute"])
    assert accuracy == 1.0
    assert weights.retrievers["mute"] <= weights.threshold
    kept = [name for name, w in weights.retrievers.items() if w > weights.threshold]
    assert len(kept) == 1 and kept[0] in ("good", "echo")  # echo is redundant with good: one of them suffices


def test_sparsity_never_costs_a_training_question():
    """The tie-break weighs less than one question: a retriever that alone is right on some
    questions keeps its weight above t."""
    gold = [f"answer {i}" for i in range(30)]
    first = [g if i < 20 else f"miss {i}" for i, g in enumerate(gold)]
    second = [g if i >= 10 else f"lost {i}" for i, g in enumerate(gold)]
    rows = [first, second, list(first)]
    correct = np.array([[a == g for a, g in zip(row, gold)] for row in rows])
    sim = similarity_tensor(rows, [ExactMatch(), TokenF1()])
    weights, accuracy = learn_weights(sim, correct, ["em", "f1"], ["first", "second", "copy"])
    assert accuracy == voter_accuracy(sim, torch.as_tensor(correct), *weights.tensors())
    assert accuracy >= 20 / 30
