"""HFReader over tiny random models built from configs, with a tokenizer trained offline."""
import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

import erag
from erag.readers import DEFAULT_PROMPT, HFReader

WORDS = "what is the capital of france paris berlin germany city river seine answer question context using"
QUESTIONS = ["what is the capital of france", "what river is in paris"]
CONTEXTS = [["paris is the capital of france", "berlin is a city"], ["the seine"]]
CHAT_TEMPLATE = (
    "{% for message in messages %}<s> user : {{ message['content'] }} </s>{% endfor %}"
    "{% if add_generation_prompt %} assistant :{% endif %}"
)


def make_tokenizer():
    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = [WORDS, DEFAULT_PROMPT, CHAT_TEMPLATE, "yes no . , ? : user assistant"]
    backend.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["<pad>", "</s>", "<unk>", "<s>"]))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", bos_token="<s>"
    )


@pytest.fixture
def t5():
    torch.manual_seed(0)
    tokenizer = make_tokenizer()
    config = T5Config(
        vocab_size=len(tokenizer), d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id, initializer_factor=5.0,  # outputs depend on inputs
    )
    return T5ForConditionalGeneration(config).eval(), tokenizer


@pytest.fixture
def llama():
    torch.manual_seed(0)
    tokenizer = make_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config).eval(), tokenizer


def test_t5_reader_is_batched_and_deterministic(t5):
    reader = HFReader(*t5, max_new_tokens=4)
    answers = reader(QUESTIONS, CONTEXTS)
    assert len(answers) == 2 and all(isinstance(a, str) for a in answers) and answers[0] != answers[1]
    assert reader(QUESTIONS, CONTEXTS) == answers
    assert [reader([q], [c])[0] for q, c in zip(QUESTIONS, CONTEXTS)] == answers


def test_t5_fid_reader(t5):
    fid = HFReader(*t5, max_new_tokens=4, fusion="fid")
    concat = HFReader(*t5, max_new_tokens=4)
    answers = fid(QUESTIONS, CONTEXTS)  # 2 and 1 documents: the missing slot is masked
    assert answers[1] == fid(QUESTIONS[1:], CONTEXTS[1:])[0]
    # With one document, fusing and concatenating give the model the same input.
    assert fid(QUESTIONS[1:], CONTEXTS[1:]) == concat(QUESTIONS[1:], CONTEXTS[1:])


def test_llama_reader_uses_chat_template_and_left_padding(llama):
    reader = HFReader(*llama, max_new_tokens=4)
    prompt = reader.prompt("what is the capital of france", "paris")
    assert prompt.startswith("<s> user : Answer the question") and prompt.endswith("</s> assistant :")
    answers = reader(QUESTIONS, CONTEXTS)
    assert answers[0] != answers[1]
    assert [reader([q], [c])[0] for q, c in zip(QUESTIONS, CONTEXTS)] == answers
    with pytest.raises(ValueError, match="encoder-decoder"):
        HFReader(*llama, fusion="fid")


def test_from_pretrained_round_trip(t5, tmp_path):
    model, tokenizer = t5
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = HFReader.from_pretrained(str(tmp_path), max_new_tokens=4)
    assert loaded.is_encoder_decoder
    assert loaded(QUESTIONS, CONTEXTS) == HFReader(model, tokenizer, max_new_tokens=4)(QUESTIONS, CONTEXTS)


def test_hf_reader_drives_evaluate(llama):
    retrieval = {f"q{i}": {"question": q, "documents": c} for i, (q, c) in enumerate(zip(QUESTIONS, CONTEXTS))}
    reader = HFReader(*llama, max_new_tokens=3)
    result = erag.evaluate(retrieval, {"q0": ["paris"], "q1": ["seine"]}, reader, "f1", ["P@1", "Hit@2"], batch_size=2)
    assert [len(v) for v in result["labels"].values()] == [2, 1]
    assert all(0.0 <= v <= 1.0 for values in result["labels"].values() for v in values)
