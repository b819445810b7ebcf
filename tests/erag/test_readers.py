"""HFReader over tiny random models built from configs, with a tokenizer trained offline."""

import pytest

import erag
from erag.readers import HFReader
from tests.erag.conftest import CONTEXTS, QUESTIONS


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
    ids = reader.lm.encode([reader.prompt("what is the capital of france", "paris")])["input_ids"][0]
    text = reader.tokenizer.decode(ids)
    assert text.startswith("<s> user : answer the question") and text.endswith("</s> assistant :")
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
