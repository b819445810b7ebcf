import math

import pytest
import torch

from rerag.decoding import marginalize_answers, top_k_per_question


def test_marginalization_groups_equal_answers():
    # "Soltha" wins by summing two contexts although "Varen" has the single best pair.
    answers = ["Soltha", "Varen", "the Soltha."]
    scores = torch.log(torch.tensor([0.3, 0.4, 0.3]))
    loglik = torch.log(torch.tensor([0.6, 0.8, 0.6]))
    best, logp = marginalize_answers(answers, scores, loglik)
    assert best == "Soltha"
    assert logp == pytest.approx(math.log(0.3 * 0.6 + 0.3 * 0.6), rel=1e-5)


def test_top_k_per_question_on_flat_rows():
    scores = torch.tensor([0.1, 0.9, 0.5, 3.0, -1.0])
    kept = top_k_per_question(scores, torch.tensor([3, 2]), k=2)
    assert [t.tolist() for t in kept] == [[1, 2], [3, 4]]
    short = top_k_per_question(scores, torch.tensor([1, 4]), k=3)
    assert [t.tolist() for t in short] == [[0], [3, 1, 2]]
