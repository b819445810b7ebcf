import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from erag.lm import load_tokenizer
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model
from rerag.models.pointer_t5 import PointerT5ForConditionalGeneration


@pytest.fixture
def pointer(tiny_t5, tokenizer_dir):
    torch.manual_seed(0)
    tok = load_tokenizer(tokenizer_dir)
    model = build_model(ModelSpec(config={**tiny_t5, "model_type": "pointer_t5"}), tok).eval()
    enc = tok(
        ["question: where was Ana born? context: Ana was born in Soltha.", "Soltha has bridges."],
        padding=True,
        return_tensors="pt",
    )
    return model, tok, enc


def test_built_from_the_config_model_type(pointer):
    assert isinstance(pointer[0], PointerT5ForConditionalGeneration)


def test_logits_are_a_normalized_log_distribution(pointer):
    model, tok, enc = pointer
    labels = tok(["Soltha", "bridges"], padding=True, return_tensors="pt").input_ids
    logits = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, labels=labels).logits
    torch.testing.assert_close(logits.exp().sum(-1), torch.ones(logits.shape[:2]))


def test_closed_gate_puts_all_mass_on_the_input_tokens(pointer):
    model, tok, enc = pointer
    with torch.no_grad():
        model.copy_gate.bias.fill_(-1e4)  # g = 0: copy only
    labels = tok(["Soltha"], return_tensors="pt").input_ids
    out = model(input_ids=enc.input_ids[:1], attention_mask=enc.attention_mask[:1], labels=labels)
    probs = out.logits.exp()[0]
    in_source = torch.zeros(probs.shape[-1], dtype=torch.bool)
    in_source[enc.input_ids[0][enc.attention_mask[0] == 1]] = True
    torch.testing.assert_close(probs[:, in_source].sum(-1), torch.ones(probs.shape[0]))
    assert probs[:, ~in_source].max() < 1e-20
    # Padding is masked out of the copy attention: the pad id is not copied from the padded row.
    padded = enc.attention_mask[1] == 0
    assert padded.any()
    row = model(input_ids=enc.input_ids[1:], attention_mask=enc.attention_mask[1:], labels=labels).logits.exp()[0]
    assert tok.pad_token_id not in enc.input_ids[1][~padded]
    assert row[:, tok.pad_token_id].max() < 1e-20


def test_continuation_bonus_copies_the_token_after_the_previous_output(pointer):
    model, tok, enc = pointer
    with torch.no_grad():
        model.copy_gate.bias.fill_(-1e4)  # copy only
        model.copy_query.weight.zero_()  # content scores 0: only the continuation bonus decides
        model.copy_continuation.fill_(50.0)
    ids = enc.input_ids[:1]
    pos = next(i for i in range(1, ids.shape[1] - 1) if (ids[0] == ids[0, i]).sum() == 1)  # a unique token
    start = torch.tensor([[model.config.decoder_start_token_id, int(ids[0, pos])]])
    probs = model(input_ids=ids, attention_mask=enc.attention_mask[:1], decoder_input_ids=start).logits.exp()
    assert probs[0, 1, ids[0, pos + 1]] > 0.99


def test_copy_head_gets_gradients_and_loss_is_finite(pointer):
    model, tok, enc = pointer
    model.train()
    labels = tok(["Soltha", "bridges"], padding=True, return_tensors="pt").input_ids
    loss = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
    for p in (model.copy_query.weight, model.copy_key.weight, model.copy_gate.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0 and torch.isfinite(p.grad).all()


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generator_generates_with_the_copy_head(pointer, num_beams):
    model, tok, enc = pointer
    texts, loglik = Generator(model, tok, max_answer_length=5).generate(
        enc.input_ids, enc.attention_mask, num_beams=num_beams
    )
    assert len(texts) == 2 and torch.isfinite(loglik).all()


def test_cached_decoding_steps_match_the_full_forward(pointer):
    model, _, enc = pointer
    out = model.generate(
        input_ids=enc.input_ids,
        attention_mask=enc.attention_mask,
        source_ids=enc.input_ids,
        max_new_tokens=4,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
    )
    step_scores = torch.stack(out.scores, dim=1)  # per step, from one cached decoder step each
    full = model(
        input_ids=enc.input_ids, attention_mask=enc.attention_mask, decoder_input_ids=out.sequences[:, :-1]
    ).logits
    torch.testing.assert_close(step_scores, full, rtol=1e-4, atol=1e-4)


def test_forward_without_input_ids_names_the_missing_argument(pointer):
    model, _, enc = pointer
    encoded = model.get_encoder()(input_ids=enc.input_ids, attention_mask=enc.attention_mask)
    with pytest.raises(ValueError, match="source_ids"):
        model(
            encoder_outputs=encoded,
            attention_mask=enc.attention_mask,
            decoder_input_ids=torch.zeros(2, 1, dtype=torch.long),
        )


def test_saved_folder_loads_through_the_auto_class(pointer, tmp_path):
    model, tok, enc = pointer
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, PointerT5ForConditionalGeneration)
    labels = tok(["Soltha", "bridges"], padding=True, return_tensors="pt").input_ids
    with torch.no_grad():
        a = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, labels=labels).logits
        b = loaded(input_ids=enc.input_ids, attention_mask=enc.attention_mask, labels=labels).logits
    torch.testing.assert_close(a, b)


def test_a_decoder_step_reads_the_cache_under_either_name(pointer):
    # transformers >= 5.24 hands generation's cache over as `cache`, earlier ones as `past_key_values`
    model, _, enc = pointer
    prefix = torch.tensor([[0, 11, 12, 13], [0, 21, 22, 23]])
    with torch.no_grad():
        full = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, decoder_input_ids=prefix).logits
        for name in ("cache", "past_key_values"):
            first = model(
                input_ids=enc.input_ids,
                attention_mask=enc.attention_mask,
                decoder_input_ids=prefix[:, :-1],
                use_cache=True,
            )
            step = model(
                input_ids=enc.input_ids,
                attention_mask=enc.attention_mask,
                decoder_input_ids=prefix[:, -1:],
                use_cache=True,
                **{name: first.past_key_values},
            ).logits
            torch.testing.assert_close(step[:, -1], full[:, -1], rtol=1e-4, atol=1e-4)
