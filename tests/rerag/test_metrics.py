import torch

from rerag.metrics import first_hit_rank


def test_first_hit_rank_follows_the_scores_and_keeps_list_order_on_ties():
    relevant = torch.tensor([False, True, False, True])
    assert first_hit_rank(torch.tensor([0.9, 0.1, 0.5, 0.3]), relevant) == 3
    assert first_hit_rank(torch.tensor([1.0, 1.0, 1.0, 1.0]), relevant) == 2
    assert first_hit_rank(torch.tensor([1.0, 2.0]), torch.tensor([False, False])) is None
