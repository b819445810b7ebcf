"""Fast vs thorough marginalization (eq. 6) on a hand-built example where they disagree.

Three kept contexts with P_RE = (0.4, 0.3, 0.3). Context 0 generates "Soltha" (P_G 0.5), contexts 1
and 2 generate "Varen" (0.6 and 0.5). Fast: Soltha 0.4 * 0.5 = 0.20, Varen 0.3 * 0.6 + 0.3 * 0.5 =
0.33, so Varen. Thorough scores both answers under every context:
Soltha 0.4 * 0.5 + 0.3 * 0.35 + 0.3 * 0.45 = 0.44, Varen 0.4 * 0.1 + 0.3 * 0.6 + 0.3 * 0.5 = 0.37,
so Soltha.
"""

import math

import pytest
import torch

from rerag.decoding import marginalize_answers, thorough_marginalize, unique_answers
from rerag.infer.readers import RAGReader

P_RE = torch.tensor([0.4, 0.3, 0.3])
GENERATED = ["Soltha", "Varen", "the Varen"]  # "the Varen" normalizes to "varen"
P_G = {
    ("Soltha", 0): 0.5,
    ("Soltha", 1): 0.35,
    ("Soltha", 2): 0.45,
    ("Varen", 0): 0.1,
    ("Varen", 1): 0.6,
    ("Varen", 2): 0.5,
}


def test_fast_and_thorough_pick_different_answers():
    own = torch.log(torch.tensor([P_G[("Soltha", 0)], P_G[("Varen", 1)], P_G[("Varen", 2)]]))
    fast, fast_logp = marginalize_answers(GENERATED, P_RE.log(), own)
    assert fast == "Varen" and fast_logp == pytest.approx(math.log(0.33), rel=1e-5)

    candidates = unique_answers(GENERATED)
    assert candidates == ["Soltha", "Varen"]
    every = torch.log(torch.tensor([[P_G[(y, j)] for j in range(3)] for y in candidates]))
    thorough, thorough_logp = thorough_marginalize(candidates, P_RE.log(), every)
    assert thorough == "Soltha" and thorough_logp == pytest.approx(math.log(0.44), rel=1e-5)


class TableLM:
    """An LM whose answers and likelihoods come from the table above; prompts are context ids."""

    template = "{text}"

    def format(self, text):
        return text

    def generate(self, prompts, num_beams=1):
        answers = [GENERATED[int(p)] for p in prompts]
        return answers, self.loglik(prompts, answers)

    def loglik(self, prompts, answers):
        return torch.log(torch.tensor([P_G[(a.removeprefix("the "), int(p))] for p, a in zip(prompts, answers)]))


def test_reader_strategies_on_the_same_example():
    contexts = [["0", "1", "2"]]
    weights = [P_RE.log() + 7.0]  # weights are logits: any shift gives the same P_RE
    assert RAGReader(TableLM(), marginalization="fast").answer(["q?"], contexts, weights)[0].text == "Varen"
    thorough = RAGReader(TableLM(), marginalization="thorough").answer(["q?"], contexts, weights)[0]
    assert thorough.text == "Soltha" and thorough.logprob == pytest.approx(math.log(0.44), rel=1e-5)
