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
# agree on a wrong answer. The accuracy is flat around that corner of the box: the search reaches it
# from (seeded) random restarts, not from the centre, hence more restarts than the default 8.
SEARCH = SearchConfig(restarts=32)


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
