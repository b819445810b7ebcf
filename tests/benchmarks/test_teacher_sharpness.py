"""benchmarks/teacher_sharpness.py: Q_G's largest share, entropy and one-hot count at a temperature."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("teacher_sharpness", BENCHMARKS / "teacher_sharpness.py")
teacher_sharpness = importlib.util.module_from_spec(spec)
sys.modules["teacher_sharpness"] = teacher_sharpness
spec.loader.exec_module(teacher_sharpness)


def test_sharpness_by_hand():
    f = torch.tensor([[0.0, -10.0], [0.0, 0.0]])  # one nearly one-hot question, one uniform
    one = teacher_sharpness.sharpness(f, 1.0)
    top = 1 / (1 + math.exp(-10))
    assert one["mean_top"] == pytest.approx((top + 0.5) / 2, rel=1e-6)
    assert one["share_top_above_0.99"] == 0.5
    entropy = -(top * math.log(top) + (1 - top) * math.log(1 - top))
    assert one["mean_entropy"] == pytest.approx((entropy + math.log(2)) / 2, rel=1e-4)
    soft = teacher_sharpness.sharpness(f, 10.0)  # F / 10: the gap of 10 nats becomes 1
    assert soft["mean_top"] == pytest.approx((1 / (1 + math.exp(-1)) + 0.5) / 2, rel=1e-6)
    assert soft["share_top_above_0.99"] == 0.0
