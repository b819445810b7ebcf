import pytest
import torch

from eor import ExactMatch, TokenF1, Voter, VoterWeights, pool, select, voter_scores

# Weighted similarities S_sim(y_m, y_n) of one question with four retrievers (diagonal unused).
S = torch.tensor([[[9.0, 0.9, 0.2, 0.8], [0.9, 9.0, 0.1, 0.7], [0.2, 0.1, 9.0, 0.3], [0.8, 0.7, 0.3, 9.0]]])


def test_mean_pooling():
    torch.testing.assert_close(pool(S, "mean"), torch.tensor([[1.9 / 3, 1.7 / 3, 0.6 / 3, 1.8 / 3]]))


def test_max_pooling():
    torch.testing.assert_close(pool(S, "max"), torch.tensor([[0.9, 0.9, 0.3, 0.8]]))


def test_majority_voting():
    # counts of s_n > 0.5: [2, 2, 0, 2] >= N/2 = 1.5; with s = 0.85 the counts [1, 1, 0, 0] reach no majority
    assert pool(S, "majority", vote_threshold=0.5).tolist() == [[1, 1, 0, 1]]
    assert pool(S, "majority", vote_threshold=0.85).tolist() == [[0, 0, 0, 0]]


def test_plurality_voting():
    assert pool(S, "plurality", vote_threshold=0.5).tolist() == [[1, 1, 0, 1]]
    assert pool(S, "plurality", vote_threshold=0.85).tolist() == [[1, 1, 0, 0]]
    assert pool(S, "plurality", vote_threshold=0.75).tolist() == [[1, 0, 0, 0]]


def test_unknown_pooling_raises():
    with pytest.raises(ValueError, match="pooling"):
        pool(S, "median")


def test_voter_scores_weight_metrics_and_retrievers():
    sim = torch.stack([S, 2 * S], dim=-1)  # two metrics
    scores = voter_scores(sim, torch.tensor([0.5, 0.25]), torch.tensor([0.6, 0.2, 0.3, 0.05]), threshold=0.1)
    # eq. 6: S_sim = 0.5 S + 0.25 (2 S) = S; eq. 7: each answer pooled over all 3 others, retriever 3
    # (below t, section 4.2) included; retriever 3 itself cannot be chosen.
    expected = torch.tensor([[0.6 * 1.9 / 3, 0.2 * 1.7 / 3, 0.3 * 0.6 / 3, float("-inf")]])
    torch.testing.assert_close(scores, expected)
    assert select(scores, torch.tensor([0.6, 0.2, 0.3, 0.05])).tolist() == [0]


@pytest.mark.parametrize(
    "pooling, retrievers, answers",
    [
        # plurality: counts over all four answers are Paris 0, Lyon 1 (D agrees), Marseille 0, so B wins;
        # dropping D from the pools would leave all counts 0, a tie the heavier A would win.
        (
            "plurality",
            {"A": 0.5, "B": 0.3, "C": 0.2, "D": 0.05},
            {"A": ["Paris"], "B": ["Lyon"], "C": ["Marseille"], "D": ["Lyon"]},
        ),
        # majority: B's 1 vote (from D) of N = 2 others is a majority; without D, N = 1 and no one has one.
        ("majority", {"A": 0.5, "B": 0.3, "D": 0.05}, {"A": ["Paris"], "B": ["Lyon"], "D": ["Lyon"]}),
    ],
)
def test_excluded_retriever_still_votes_in_the_others_pools(pooling, retrievers, answers):
    # Section 4.2 replaces w^r_m by w^r_m I{w^r_m > t} in eq. 7: D (w^r 0.05 <= t) cannot answer, but
    # its answer stays among the y_n, n != m, that the others are pooled over (appendix C.4).
    voter = Voter([ExactMatch()], VoterWeights({"em": 1.0}, retrievers, threshold=0.1, pooling=pooling))
    assert voter.vote(answers) == ["Lyon"]


def test_ties_go_to_the_heavier_retriever_and_no_active_retriever_falls_back():
    weights = torch.tensor([0.2, 0.5, 0.3])
    assert select(torch.tensor([[1.0, 1.0, 0.5], [0.0, 0.0, 0.0]]), weights).tolist() == [1, 1]
    assert select(torch.full((1, 3), float("-inf")), weights).tolist() == [1]


def test_voter_picks_the_agreed_answer_and_weights_round_trip(tmp_path):
    weights = VoterWeights({"em": 0.5, "f1": 0.5}, {"A": 0.3, "B": 0.3, "C": 0.3})
    voter = Voter([ExactMatch(), TokenF1()], weights)
    answers = {"C": ["Paris", "Nile"], "A": ["Rome", "the Nile"], "B": ["paris", "Amazon river"]}
    # B and C tie on "paris"; with equal weights the first in the weights' order (B) answers.
    assert voter.vote(answers) == ["paris", "the Nile"]
    weights.save(tmp_path / "w.json")
    assert VoterWeights.load(tmp_path / "w.json") == weights
    with pytest.raises(ValueError, match="do not match"):
        Voter([ExactMatch()], weights)
    with pytest.raises(ValueError, match="no answers"):
        voter.vote({"A": ["x"], "B": ["y"]})
