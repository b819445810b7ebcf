import pytest
import torch
from transformers import AutoTokenizer

from erag.lm import shared_prefix_length
from rerag.inputs import passage_windows
from rerag.models.estimator import RelevanceEstimator, pool_windows
from rerag.models.loading import ModelSpec, build_model
from tests.rerag.conftest import TINY_LLAMA


def generation_prompt(estimator):
    """The token ids that close a chat prompt: end of the user turn, start of the assistant's."""
    return estimator.tokenizer("<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False).input_ids


PAIRS = (["where was Ana born?"] * 3, ["Ana was born in Soltha.", "bees", {"title": "Ana", "text": "x"}])


@pytest.fixture
def estimator(tokenizer_dir, tiny_t5):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    return RelevanceEstimator(build_model(ModelSpec(config=tiny_t5), tok).eval(), tok)


@pytest.fixture
def causal_estimator(chat_tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    torch.manual_seed(0)
    return RelevanceEstimator(build_model(ModelSpec(config=TINY_LLAMA), tok).eval(), tok, max_length=64)


def test_label_ids_come_from_the_tokenizer(estimator):
    tok = estimator.tokenizer
    assert estimator.true_id == tok.convert_tokens_to_ids("true")
    assert estimator.false_id == tok.convert_tokens_to_ids("false")
    with pytest.raises(ValueError, match="single token"):
        RelevanceEstimator(estimator.model, tok, true_word="truly relevant")


def test_two_row_score_equals_full_softmax_log_odds(estimator):
    enc = estimator.encode(*PAIRS)
    with torch.no_grad():
        s = estimator(enc["input_ids"], enc["attention_mask"])
        lp_t, lp_f = estimator.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
        logits = estimator.model(**enc, decoder_input_ids=torch.zeros(3, 1, dtype=torch.long)).logits[:, 0]
        full = logits.log_softmax(-1)
    torch.testing.assert_close(s, lp_t - lp_f, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lp_t, full[:, estimator.true_id], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lp_f, full[:, estimator.false_id], rtol=1e-5, atol=1e-5)


def test_under_bf16_autocast_training_log_odds_match_evaluation_s(causal_estimator):
    # Training reads log p_true - log p_false, evaluation reads s from two head rows in float32:
    # a bf16 head under autocast would round the log-odds the RE is trained on (bf16 keeps 8 bits).
    est = causal_estimator
    est.model.to(torch.bfloat16)
    enc = est.encode(*PAIRS)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        s = est(enc["input_ids"], enc["attention_mask"])
        lp_t, lp_f = est.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
    assert lp_t.dtype == torch.float32
    torch.testing.assert_close(lp_t - lp_f, s, rtol=1e-4, atol=1e-4)


def test_save_and_load_give_equal_scores(estimator, tmp_path):
    passages = ["Ana was born in Soltha.", "Ana kept bees.", "Soltha has bridges."]
    before = estimator.score("where was Ana born?", passages)
    estimator.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = RelevanceEstimator.from_pretrained(tmp_path)
    torch.testing.assert_close(loaded.score("where was Ana born?", passages), before)
    assert loaded.template == estimator.template


def test_an_re_with_context_words_scores_each_passage_by_its_best_window(estimator, tmp_path):
    passages = ["Ana kept bees near the river and Ana was born in Soltha long ago.", "Soltha has bridges."]
    whole = estimator.score("where was Ana born?", passages)
    by_window = estimator.score("where was Ana born?", passage_windows(passages[0], 4))
    estimator.context_words = 4
    s = estimator.score("where was Ana born?", passages, batch_size=2)
    assert s[0].item() == pytest.approx(by_window.max().item(), abs=1e-5)
    assert s[0].item() != pytest.approx(whole[0].item(), abs=1e-3)
    assert s[1].item() == pytest.approx(whole[1].item(), abs=1e-5)  # shorter than a window: whole
    estimator.save_pretrained(tmp_path)
    loaded = RelevanceEstimator.from_pretrained(tmp_path)
    assert loaded.context_words == 4
    torch.testing.assert_close(loaded.score("where was Ana born?", passages), s)
    with pytest.raises(ValueError, match="context_words: must be at least 2"):
        RelevanceEstimator(estimator.model, estimator.tokenizer, context_words=1)


def test_windows_pool_by_their_best_their_mean_or_their_first():
    s = torch.tensor([1.0, 3.0, 2.0, -1.0, 5.0, 0.0])
    window_of = torch.tensor([0, 0, 0, 1, 2, 2])  # three passages of 3, 1 and 2 windows
    assert pool_windows(s, window_of, 3).tolist() == [3.0, -1.0, 5.0]
    assert pool_windows(s, window_of, 3, "mean").tolist() == [2.0, -1.0, 2.5]
    assert pool_windows(s, window_of, 3, "first").tolist() == [1.0, -1.0, 5.0]
    with pytest.raises(ValueError, match="window pooling: max, mean or first, got 'sum'"):
        pool_windows(s, window_of, 3, "sum")


def test_an_re_keeps_its_window_pooling_when_saved(estimator, tmp_path):
    passages = ["Ana kept bees near the river and Ana was born in Soltha long ago.", "Soltha has bridges."]
    by_window = estimator.score("where was Ana born?", passage_windows(passages[0], 4))
    estimator.context_words, estimator.window_pooling = 4, "mean"
    s = estimator.score("where was Ana born?", passages)
    assert s[0].item() == pytest.approx(by_window.mean().item(), abs=1e-5)
    estimator.save_pretrained(tmp_path)
    loaded = RelevanceEstimator.from_pretrained(tmp_path)
    assert loaded.window_pooling == "mean"
    torch.testing.assert_close(loaded.score("where was Ana born?", passages), s)


@pytest.mark.parametrize("kind", ["estimator", "causal_estimator"])
def test_length_sorted_chunks_give_each_row_its_own_score(kind, request):
    # Mixed lengths: the bucketed path must score every row as a forward pass on that row alone does.
    estimator = request.getfixturevalue(kind)
    passages = ["bees", "Ana was born in Soltha, a town of bridges and bees in the north.", "x y", "Soltha"] * 2
    enc = estimator.encode(["where was Ana born?"] * len(passages), passages)
    with torch.no_grad():
        bucketed = estimator.score_rows(enc["input_ids"], enc["attention_mask"], batch_size=3)
        alone = torch.cat([estimator.score("where was Ana born?", [p], batch_size=1) for p in passages])
    torch.testing.assert_close(bucketed, alone, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        estimator.score("where was Ana born?", passages, batch_size=3), alone, rtol=1e-4, atol=1e-4
    )


def test_a_causal_re_reads_each_question_once_for_all_its_passages(causal_estimator):
    # Rows of one question share the chat template and the question: predict scores them in chunks of
    # one question, so that prefix runs once per chunk; every row's s is still its own.
    est = causal_estimator
    passages = ["Ana was born in Soltha.", "bees", "Soltha is a town of bridges."]
    questions = ["where was Ana born?", "who keeps bees in the town?"]
    pairs = [(q, p) for p in passages for q in questions]  # the questions interleaved
    tokens = []
    hook = est.model.get_input_embeddings().register_forward_hook(lambda m, args, out: tokens.append(args[0].numel()))
    s = est.predict(pairs, batch_size=8)
    hook.remove()
    torch.testing.assert_close(s, torch.cat([est.predict([pair]) for pair in pairs]), rtol=1e-4, atol=1e-4)
    expected = []
    for q in questions:
        enc = est.encode([q] * 3, passages)
        prefix = shared_prefix_length(enc["input_ids"], enc["attention_mask"])
        assert q in est.tokenizer.decode(enc["input_ids"][0, :prefix])  # the question is in the prefix
        expected += [prefix, enc["input_ids"].numel() - 3 * prefix]
    assert tokens == expected


def test_causal_re_reads_the_first_answer_position_after_the_chat_prompt(causal_estimator):
    est = causal_estimator
    enc = est.encode(*PAIRS)
    assert enc["attention_mask"][1].sum() < enc["attention_mask"][0].sum()  # right padding in the batch
    with torch.no_grad():
        s = est(enc["input_ids"], enc["attention_mask"])
        lp_t, lp_f = est.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
    torch.testing.assert_close(s, lp_t - lp_f, rtol=1e-5, atol=1e-5)
    for row in range(3):  # the full softmax of a forward pass on the row alone, at its last position
        ids = enc["input_ids"][row, : int(enc["attention_mask"][row].sum())]
        assert ids[-len(generation_prompt(est)) :].tolist() == generation_prompt(est)
        with torch.no_grad():
            full = est.model(ids[None]).logits[0, -1].log_softmax(-1)
        assert lp_t[row].item() == pytest.approx(full[est.true_id].item(), abs=1e-5)
        assert lp_f[row].item() == pytest.approx(full[est.false_id].item(), abs=1e-5)


def test_causal_prompt_is_cut_inside_the_chat_template(causal_estimator):
    enc = causal_estimator.encode(["where was Ana born?"], ["Ana was born in Soltha. " * 40])
    end = generation_prompt(causal_estimator)
    assert enc["input_ids"].shape[1] == 64 and enc["input_ids"][0, -len(end) :].tolist() == end


def test_causal_label_words_must_be_one_token_after_the_generation_prompt(causal_estimator):
    with pytest.raises(ValueError, match="single token as the first answer token"):
        RelevanceEstimator(causal_estimator.model, causal_estimator.tokenizer, true_word="truly relevant")


def test_an_re_scores_alike_with_its_adapter_merged_for_scoring(chat_tokenizer_dir):
    # A shared base with the RE's adapter and another: the copy folds in the RE's alone.
    from rerag.models.lora import LoraSpec, add_adapters

    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    torch.manual_seed(0)
    spec = LoraSpec(r=2, dropout=0.0, target_modules=["q_proj", "v_proj", "down_proj"])
    model = add_adapters(build_model(ModelSpec(config=TINY_LLAMA), tok), {"re": spec, "generator": spec}).eval()
    for name, p in model.named_parameters():
        if "lora_B" in name:  # B starts at zero: an untrained adapter changes nothing
            torch.nn.init.normal_(p, std=0.5 if ".re." in name else 5.0)
    est = RelevanceEstimator(model, tok, adapter="re", max_length=64)
    pairs = [("where was Ana born?", "Ana was born in Soltha."), ("who keeps bees?", "bees")]
    with torch.no_grad():
        s = est.predict(pairs)
        copy = est.for_scoring()  # float32 on a CPU: merged
        assert copy is not est and not hasattr(copy.model, "peft_config")
        torch.testing.assert_close(copy.predict(pairs), s, rtol=1e-5, atol=1e-5)
        with est.model.disable_adapter():
            assert (est.predict(pairs) - s).abs().max() > 1e-3  # the adapter matters
        torch.testing.assert_close(est.predict(pairs), s)  # the original keeps its adapters
    assert hasattr(est.model, "peft_config") and est.model.active_adapter == "re"
    est.merge_for_scoring = False
    assert est.for_scoring() is est
    est.merge_for_scoring = None
    est.model.to(torch.bfloat16)  # the merge would round the adapter's update: not merged
    assert est.for_scoring() is est
