"""benchmarks/re_length_response.py: each rule's passage scores from whole-passage and window scores."""

import importlib.util
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "re_length_response.py"
spec = importlib.util.spec_from_file_location("re_length_response", SCRIPT)
re_length_response = importlib.util.module_from_spec(spec)
spec.loader.exec_module(re_length_response)


def test_each_rule_scores_a_passage_from_its_own_windows():
    whole = torch.tensor([0.5, 2.0, -1.0])
    # passage 0 has windows 1.0 and 3.0, passage 1 one window 0.0, passage 2 windows -2.0, 0.0, 1.0
    windows = torch.tensor([1.0, 3.0, 0.0, -2.0, 0.0, 1.0])
    window_of = torch.tensor([0, 0, 1, 2, 2, 2])
    scores = re_length_response.rules(whole, windows, window_of)
    assert scores["whole"].tolist() == [0.5, 2.0, -1.0]
    assert scores["best window"].tolist() == [3.0, 0.0, 1.0]
    assert scores["whole or best window"].tolist() == [3.0, 2.0, 1.0]
    assert torch.allclose(scores["mean window"], torch.tensor([2.0, 0.0, -1.0 / 3.0]))
