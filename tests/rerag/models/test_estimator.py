import pytest
import torch
from transformers import AutoTokenizer

from rerag.models.estimator import RelevanceEstimator
from rerag.models.loading import ModelSpec, build_seq2seq


@pytest.fixture
def estimator(tokenizer_dir, tiny_t5):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    return RelevanceEstimator(build_seq2seq(ModelSpec(config=tiny_t5), tok).eval(), tok)


def test_label_ids_come_from_the_tokenizer(estimator):
    tok = estimator.tokenizer
    assert estimator.true_id == tok.convert_tokens_to_ids("true")
    assert estimator.false_id == tok.convert_tokens_to_ids("false")
    with pytest.raises(ValueError, match="single token"):
        RelevanceEstimator(estimator.model, tok, true_word="truly relevant")


def test_two_row_score_equals_full_softmax_log_odds(estimator):
    enc = estimator.encode(["where was Ana born?"] * 3, ["Ana was born in Soltha.", "bees", {"title": "Ana", "text": "x"}])
    with torch.no_grad():
        s = estimator(enc["input_ids"], enc["attention_mask"])
        lp_t, lp_f = estimator.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
        logits = estimator.model(**enc, decoder_input_ids=torch.zeros(3, 1, dtype=torch.long)).logits[:, 0]
        full = logits.log_softmax(-1)
    torch.testing.assert_close(s, lp_t - lp_f, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lp_t, full[:, estimator.true_id], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lp_f, full[:, estimator.false_id], rtol=1e-5, atol=1e-5)


def test_save_and_load_give_equal_scores(estimator, tmp_path):
    passages = ["Ana was born in Soltha.", "Ana kept bees.", "Soltha has bridges."]
    before = estimator.score("where was Ana born?", passages)
    estimator.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = RelevanceEstimator.from_pretrained(tmp_path)
    torch.testing.assert_close(loaded.score("where was Ana born?", passages), before)
    assert loaded.template == estimator.template


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_length_sorted_chunks_give_each_row_its_own_score(estimator, padding_side):
    # Mixed lengths: the bucketed path must score every row as a forward pass on that row alone does.
    estimator.tokenizer.padding_side = padding_side
    passages = ["bees", "Ana was born in Soltha, a town of bridges and bees in the north.", "x y", "Soltha"] * 2
    enc = estimator.encode(["where was Ana born?"] * len(passages), passages)
    with torch.no_grad():
        bucketed = estimator.score_rows(enc["input_ids"], enc["attention_mask"], batch_size=3)
        alone = torch.cat([estimator.score("where was Ana born?", [p], batch_size=1) for p in passages])
    torch.testing.assert_close(bucketed, alone, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(estimator.score("where was Ana born?", passages, batch_size=3), alone,
                               rtol=1e-4, atol=1e-4)
