import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from erag.lm import CausalLM, Seq2SeqLM, load_lm
from rerag.infer.readers import ParametricReader, RAGReader
from rerag.inputs import fill
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
QUESTIONS = ["where was Ana born?", "what did Bo work as?"]
CONTEXTS = [
    ["Ana was born in Soltha.", {"title": "Ana", "text": "Ana kept bees."}, "Soltha has bridges."],
    ["Bo worked as a potter."],
]


@pytest.fixture
def causal_lm(tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return CausalLM(LlamaForCausalLM(config).eval(), tok, max_new_tokens=4, batch_size=2)


@pytest.fixture
def seq2seq_lm(tokenizer_dir, tiny_t5):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    return Generator(build_model(ModelSpec(config=tiny_t5), tok).eval(), tok, max_answer_length=6).as_lm(batch_size=2)


def test_templates_take_strings_and_fid_contexts():
    assert fill("{question} | {title} | {text}", "q?", {"title": "T", "text": "x"}) == "q? | T | x"
    assert fill("{question} | {context}", "q?", {"title": "T", "text": "x"}) == "q? | T\nx"
    assert fill("{question} | {context}", "q?", "plain") == "q? | plain"


def test_causal_prompt_goes_through_the_chat_template(causal_lm):
    prompt = RAGReader(causal_lm).prompt("where?", "ctx")
    text = causal_lm.tokenizer.decode(causal_lm.encode([prompt])["input_ids"][0])
    assert text.strip().startswith("<|user|>") and text.endswith("<|assistant|>") and "Question: where?" in text


def test_causal_loglik_matches_an_unpadded_forward_pass(causal_lm):
    tok, model = causal_lm.tokenizer, causal_lm.model
    prompts = ["short?", "a much longer prompt about Soltha and bees?"]
    answers = ["Soltha", "a potter of Soltha"]
    got = causal_lm.loglik(prompts, answers)  # one batch: padded rows
    for prompt, answer, value in zip(prompts, answers, got):
        p = causal_lm.encode([prompt])["input_ids"][0].tolist()  # alone: no padding
        a = [t for t in causal_lm.encode_answers([answer])[0].tolist() if t != -100]  # cut to max_new_tokens
        assert a[-1] == tok.eos_token_id and len(a) <= causal_lm.max_new_tokens
        with torch.no_grad():
            logp = model(torch.tensor([p + a])).logits[0].log_softmax(-1)
        expected = sum(logp[len(p) - 1 + t, a[t]] for t in range(len(a)))
        assert value.item() == pytest.approx(expected.item(), abs=1e-4)


def test_causal_generation_is_batch_invariant(causal_lm):
    prompts = ["short?", "a much longer prompt about Soltha and bees?", "x"]
    texts, loglik = causal_lm.generate(prompts)
    alone = [causal_lm.generate([p]) for p in prompts]  # left padding must not change answers
    assert texts == [t[0][0] for t in alone]
    torch.testing.assert_close(loglik, torch.cat([t[1] for t in alone]), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode,marginalization", [("rag", "fast"), ("rag", "thorough"), ("ralm", "fast")])
def test_readers_answer_every_question(causal_lm, seq2seq_lm, mode, marginalization):
    for lm in (causal_lm, seq2seq_lm):
        reader = RAGReader(lm, mode, marginalization)
        answers = reader.answer(QUESTIONS, CONTEXTS, [torch.tensor([2.0, 0.0, -1.0]), torch.tensor([0.5])])
        assert len(answers) == 2 and all(isinstance(a.text, str) and a.logprob <= 1e-6 for a in answers)
        assert reader(QUESTIONS, CONTEXTS) == [a.text for a in reader.answer(QUESTIONS, CONTEXTS)]


def test_reranker_weights_are_used(seq2seq_lm):
    calls = []

    def reranker(question, passages):
        calls.append((question, len(passages)))
        return torch.zeros(len(passages))

    RAGReader(seq2seq_lm, reranker=reranker)(QUESTIONS, CONTEXTS)
    assert calls == [(QUESTIONS[0], 3), (QUESTIONS[1], 1)]


def test_bad_inputs_are_clear_errors(seq2seq_lm):
    reader = RAGReader(seq2seq_lm)
    with pytest.raises(ValueError, match="question 1 is empty"):
        reader(["where?", "  "], [["a"], ["b"]])
    with pytest.raises(ValueError, match="question 0 .* has no contexts"):
        reader(["where?"], [[]])
    with pytest.raises(ValueError, match="2 questions but 1 context lists"):
        reader(["a?", "b?"], [["x"]])
    with pytest.raises(ValueError, match=r"question 0: \(2,\) weights for 3 contexts"):
        reader.answer(QUESTIONS[:1], CONTEXTS[:1], [torch.zeros(2)])
    with pytest.raises(ValueError, match="got 1 weight lists for 2 questions"):
        reader.answer(QUESTIONS, CONTEXTS, [torch.zeros(3)])
    with pytest.raises(ValueError, match="mode"):
        RAGReader(seq2seq_lm, mode="fusion")


@pytest.mark.parametrize("model_type", ["t5", "pointer_t5"])
def test_fusion_in_decoder_reads_a_list_at_once_and_one_context_as_rag_does(tokenizer_dir, tiny_t5, model_type):
    """Mode fid (eRAG's end-to-end reader): one context is a per-document reading (eRAG's label);
    a list is one answer from every context's encoder states, the same alone as in a batch. The
    copy head of the demo's reader (pointer_t5) reads the fused input ids."""
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    model = build_model(ModelSpec(config={**tiny_t5, "model_type": model_type}), tok).eval()
    seq2seq_lm = Generator(model, tok, max_answer_length=6).as_lm(batch_size=8)  # both questions in one batch
    fid, rag = RAGReader(seq2seq_lm, "fid"), RAGReader(seq2seq_lm, "rag")
    single = [[c[0]] for c in CONTEXTS]
    fused_one, rag_one = fid.answer(QUESTIONS, single), rag.answer(QUESTIONS, single)
    assert [a.text for a in fused_one] == [a.text for a in rag_one]
    assert [a.logprob for a in fused_one] == pytest.approx([a.logprob for a in rag_one], abs=1e-4)
    together = fid.answer(QUESTIONS, CONTEXTS)  # 3 and 1 contexts: the second's missing slots masked
    alone = [fid.answer([q], [c])[0] for q, c in zip(QUESTIONS, CONTEXTS)]
    assert [a.text for a in together] == [a.text for a in alone]
    assert [a.logprob for a in together] == pytest.approx([a.logprob for a in alone], abs=1e-4)
    assert all(a.logprob <= 1e-6 for a in together)
    beams = RAGReader(seq2seq_lm, "fid", num_beams=2).answer(QUESTIONS, CONTEXTS)
    assert len(beams) == 2 and all(a.logprob <= 1e-6 for a in beams)


def test_fused_inputs_pack_each_questions_documents_with_no_padding_between(seq2seq_lm):
    """A copy head rewards the token after the previous output: a pad between two documents would
    follow the decoder's start token (the pad id), so FiD packs each question's real tokens."""
    from erag.lm import fused_encoder_inputs

    enc = seq2seq_lm.encode(["Ana was born in Soltha.", "Ana.", "Bo worked as a potter."])
    real = enc["attention_mask"].sum(dim=1).tolist()
    fused = fused_encoder_inputs(seq2seq_lm.model, enc, [2, 1])
    assert fused["attention_mask"].sum(dim=1).tolist() == [real[0] + real[1], real[2]]
    first = fused["input_ids"][0, : real[0] + real[1]].tolist()
    assert first == enc["input_ids"][0, : real[0]].tolist() + enc["input_ids"][1, : real[1]].tolist()
    assert seq2seq_lm.tokenizer.pad_token_id not in first


def test_fusion_in_decoder_needs_an_encoder_decoder(causal_lm):
    with pytest.raises(ValueError, match="encoder-decoder"):
        RAGReader(causal_lm, mode="fid")


def test_parametric_reader_ignores_contexts(causal_lm):
    reader = ParametricReader(causal_lm)
    assert reader(QUESTIONS) == reader(QUESTIONS, CONTEXTS)
    with pytest.raises(ValueError, match="question 0 is empty"):
        reader([""])


def test_load_lm_picks_the_architecture(causal_lm, seq2seq_lm, tmp_path):
    causal_lm.model.save_pretrained(tmp_path / "causal")
    causal_lm.tokenizer.save_pretrained(tmp_path / "causal")
    seq2seq_lm.model.save_pretrained(tmp_path / "s2s")
    seq2seq_lm.tokenizer.save_pretrained(tmp_path / "s2s")
    assert isinstance(load_lm(str(tmp_path / "causal")), CausalLM)
    assert isinstance(load_lm(str(tmp_path / "s2s")), Seq2SeqLM)
