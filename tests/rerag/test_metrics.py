import pytest
import torch

from rerag.metrics import first_hit_rank, teacher_margin


def test_first_hit_rank_follows_the_scores_and_keeps_list_order_on_ties():
    relevant = torch.tensor([False, True, False, True])
    assert first_hit_rank(torch.tensor([0.9, 0.1, 0.5, 0.3]), relevant) == 3
    assert first_hit_rank(torch.tensor([1.0, 1.0, 1.0, 1.0]), relevant) == 2
    assert first_hit_rank(torch.tensor([1.0, 2.0]), torch.tensor([False, False])) is None


def test_teacher_margin_is_gold_minus_the_best_other_over_usable_questions():
    f = torch.tensor([[-1.0, -3.0, -2.0], [-5.0, -1.0, -4.0], [-1.0, -1.0, -1.0]])
    gold = torch.tensor([[True, False, False], [True, False, False], [False, False, False]])
    assert teacher_margin(f, gold).item() == pytest.approx(((-1 + 2) + (-5 + 1)) / 2)  # the third has no gold
    assert teacher_margin(f, torch.zeros_like(gold)) is None
