"""UPR's scores (rerag.infer.upr) against a hand computation on a tiny causal LM."""

from __future__ import annotations

import torch
from transformers import AutoTokenizer

from erag.lm import encode_prompts
from rerag.infer.upr import UPRScorer
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model
from rerag.prompts import UPR_TEMPLATE
from tests.rerag.conftest import TINY_LLAMA


def hand_loglik(model, tok, passage: str, question: str) -> float:
    """log P(question, end of turn | the UPR prompt of passage as a chat turn), one full forward pass of
    one row: no batch, no padding, no shared prefix. The prompt's ids are the package's chat encoding
    (`erag.lm.encode_prompts`, tested on its own)."""
    prompt_ids = encode_prompts(tok, [UPR_TEMPLATE.format(text=passage)])["input_ids"][0].tolist()
    assert prompt_ids[0] == tok.convert_tokens_to_ids("<|im_start|>")  # a chat turn
    target = tok(question, add_special_tokens=False).input_ids + [tok.eos_token_id]
    ids = torch.tensor([prompt_ids + target])
    log_probs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return sum(log_probs[len(prompt_ids) + t - 1, token].item() for t, token in enumerate(target))


def test_scores_are_the_question_loglik_given_each_passage(chat_tokenizer_dir):
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    model = build_model(ModelSpec(config=TINY_LLAMA), tok).eval()
    scorer = UPRScorer(Generator(model, tok, template=UPR_TEMPLATE, max_length=128), batch_size=2)
    questions = ["who founded the guild?", "where does anna live?"]
    passages = [
        [{"title": "t", "text": "anna founded the guild"}, {"title": "t", "text": "the city is old"}, "a plain string"],
        [{"title": "u", "text": "anna lives in the city"}, {"title": "t", "text": "anna founded the guild"}],
    ]
    scores = scorer.score(questions, passages)
    assert [len(s) for s in scores] == [3, 2]
    for question, ps, s in zip(questions, passages, scores):
        for passage, got in zip(ps, s):
            text = passage if isinstance(passage, str) else passage["text"]
            assert abs(got.item() - hand_loglik(model, tok, text, question)) < 1e-4
    # the same passage read for two questions scores each question on its own
    assert scores[0][0].item() != scores[1][1].item()
