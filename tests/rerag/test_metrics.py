import pytest
import torch

from erag.answers import exact_match, token_f1
from rerag.metrics import AnswerScore, first_hit_rank


def test_first_hit_rank_follows_the_scores_and_keeps_list_order_on_ties():
    relevant = torch.tensor([False, True, False, True])
    assert first_hit_rank(torch.tensor([0.9, 0.1, 0.5, 0.3]), relevant) == 3
    assert first_hit_rank(torch.tensor([1.0, 1.0, 1.0, 1.0]), relevant) == 2
    assert first_hit_rank(torch.tensor([1.0, 2.0]), torch.tensor([False, False])) is None


def test_answer_score_is_the_mean_per_question():
    em, f1 = AnswerScore(exact_match), AnswerScore(token_f1)
    for metric in (em, f1):
        metric.update(["Paris", "the city of Lyon"], [["paris"], ["Lyon"]])
    assert em.compute().item() == pytest.approx(0.5)
    assert f1.compute().item() == pytest.approx((1.0 + token_f1("the city of Lyon", ["Lyon"])) / 2)
