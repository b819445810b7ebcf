"""Tiny random models built from configs, with a word-level tokenizer trained offline."""

import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

from erag.prompts import HF_READER_PROMPT

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
    corpus = [WORDS, HF_READER_PROMPT, CHAT_TEMPLATE, "yes no . , ? : user assistant"]
    backend.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["<pad>", "</s>", "<unk>", "<s>"]))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", bos_token="<s>"
    )


def tiny_t5(**config):
    """A tiny T5 reader and its tokenizer, seeded; `config` adds to or overrides the T5Config."""
    torch.manual_seed(0)
    tokenizer = make_tokenizer()
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_ff=64,
        d_kv=8,
        num_layers=2,
        num_heads=4,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        **config,
    )
    return T5ForConditionalGeneration(config).eval(), tokenizer


@pytest.fixture
def t5():
    return tiny_t5(initializer_factor=5.0)  # outputs depend on inputs


@pytest.fixture
def llama():
    torch.manual_seed(0)
    tokenizer = make_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config).eval(), tokenizer
