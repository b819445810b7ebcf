import numpy as np
import pytest
import torch

from eor import (
    BERTScore,
    EmbeddingSimilarity,
    ExactMatch,
    NLIEntailment,
    TokenF1,
    build_metric,
    similarity_tensor,
)


class Counting:
    """A metric that records the pairs it is asked for."""

    def __init__(self, symmetric):
        self.name, self.symmetric, self.pairs = "count", symmetric, []

    def __call__(self, a, b):
        self.pairs.extend(zip(a, b))
        return np.array([float(len(x) - len(y)) for x, y in zip(a, b)])


def test_similarity_tensor_layout_and_values():
    answers = [["Paris", "Nile"], ["paris", "Amazon"], ["Rome", "the Nile"]]  # [R=3][Q=2]
    sim = similarity_tensor(answers, [ExactMatch(), TokenF1()])
    assert sim.shape == (2, 3, 3, 2) and sim.dtype == torch.float32
    assert torch.all(sim[:, torch.arange(3), torch.arange(3)] == 0)
    assert sim[0, 0, 1, 0] == 1 and sim[0, 0, 2, 0] == 0 and sim[1, 0, 2, 0] == 1 and sim[1, 0, 1, 1] == 0


@pytest.mark.parametrize("symmetric", [True, False])
def test_each_distinct_pair_is_scored_once(symmetric):
    answers = [["a", "x"], ["bb", "x"], ["a", "yyy"]]
    metric = Counting(symmetric)
    sim = similarity_tensor(answers, [metric])
    assert len(metric.pairs) == len(set(metric.pairs))
    expected_pairs = {("a", "bb"), ("a", "a"), ("x", "yyy")} | (set() if symmetric else {("bb", "a"), ("yyy", "x")})
    assert set(metric.pairs) == expected_pairs | {("x", "x")}
    if not symmetric:  # an asymmetric metric keeps the direction: sim[q, m, n] = f(y_m, y_n)
        assert sim[0, 0, 1, 0] == -1 and sim[0, 1, 0, 0] == 1 and sim[1, 2, 0, 0] == 2


def test_bertscore_with_a_local_encoder(encoder_dir):
    metric = BERTScore(encoder_dir)
    scores = metric(
        ["paris", "the capital of italy is rome", "nile"], ["paris", "the capital of italy is rome", "everest"]
    )
    assert scores.shape == (3,)
    np.testing.assert_allclose(scores[:2], 1.0, atol=1e-4)
    assert scores[2] < 0.9999


def test_embedding_similarity_with_a_sentence_transformers_path(sentence_transformer_dir):
    scores = EmbeddingSimilarity(sentence_transformer_dir)(["paris", "rome"], ["paris", "nile river"])
    assert scores[0] == pytest.approx(1.0, abs=1e-5) and -1.0 <= scores[1] < 1.0


def test_nli_entailment_reads_premise_from_the_other_answer(nli_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    metric = NLIEntailment(nli_dir)
    assert metric.entailment_index == 1 and not metric.symmetric
    scores = metric(["paris", "rome is big"], ["paris france", "nile"])
    tokenizer, model = (
        AutoTokenizer.from_pretrained(nli_dir),
        AutoModelForSequenceClassification.from_pretrained(nli_dir),
    )
    with torch.no_grad():
        expected = model(**tokenizer(["paris france"], ["paris"], return_tensors="pt")).logits.softmax(-1)[0, 1]
    assert scores[0] == pytest.approx(expected.item(), abs=1e-5) and np.all((0 <= scores) & (scores <= 1))


def test_build_metric_specs(encoder_dir):
    assert isinstance(build_metric("em"), ExactMatch) and isinstance(build_metric("f1"), TokenF1)
    assert isinstance(build_metric(f"bertscore:{encoder_dir}"), BERTScore)
    with pytest.raises(ValueError, match="metric spec"):
        build_metric("bleu")
    with pytest.raises(ValueError, match="metric spec"):
        build_metric("nli")
