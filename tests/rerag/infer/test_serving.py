"""rerag.infer.serving: each serving format loads with its own library and scores as rerag does."""

import random

import pytest
import torch

from rerag.infer.export import export
from rerag.infer.serving import export_serving, pair_chat_template
from rerag.models.estimator import RelevanceEstimator
from rerag.module import RERAGModule
from tests.rerag.conftest import TINY_WORLD  # noqa: F401
from tests.rerag.helpers import changed

WORDS = "the river city guild born founded north mapped island queen king harbour built old new".split()


def pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` (question, passage) pairs of random words, passages of 3 to 40 words: rows of many lengths."""
    rng = random.Random(seed)
    text = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    return [(text(rng.randint(2, 8)) + "?", text(rng.randint(3, 40))) for _ in range(n)]


@pytest.fixture(scope="module")
def whole_tokenizer_dir(chat_tokenizer_dir, tmp_path_factory):
    """The chat tokenizer without a prefix space at each call or an appended </s>, as SmolLM2's (GPT-2's)
    tokenizer: a prompt tokenized in pieces (rerag) and whole (a server) then gives the same ids."""
    from tokenizers import pre_tokenizers, processors
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(chat_tokenizer_dir)
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.backend_tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)  # no </s> appended
    out = tmp_path_factory.mktemp("whole_tokenizer")
    tok.save_pretrained(str(out))
    return str(out)


@pytest.fixture
def causal_export(causal_module_kwargs, whole_tokenizer_dir, tmp_path):
    """A tiny random decoder-only RE (its own Llama, its base's chat template) exported with every serving format."""
    torch.manual_seed(0)
    tokenizers = {"inputs.re_tokenizer": whole_tokenizer_dir, "inputs.generator_tokenizer": whole_tokenizer_dir}
    module = RERAGModule(**changed(causal_module_kwargs, tokenizers)).eval()
    export(module.estimator, module.generator, tmp_path / "export")
    # a server never cuts the passage as rerag does at max_length (96 here): compare on prompts within it
    estimator = RelevanceEstimator.from_pretrained(tmp_path / "export" / "estimator", max_length=512)
    written = export_serving(estimator, tmp_path / "export")
    return tmp_path / "export", estimator, written


def test_the_cross_encoder_scores_as_rerag_does(causal_export):
    from sentence_transformers import CrossEncoder

    out, estimator, written = causal_export
    assert written["cross_encoder"] == out / "estimator"  # the RE's own folder: one copy of the weights
    batch = pairs(500)
    expected = estimator.predict(batch)
    model = CrossEncoder(str(out / "estimator"), activation_fn=torch.nn.Identity())
    got = torch.as_tensor(model.predict(batch, batch_size=32))
    assert (got - expected).abs().max() <= 1e-4
    sigmoid = torch.as_tensor(CrossEncoder(str(out / "estimator")).predict(batch[:20]))
    assert torch.allclose(sigmoid, torch.sigmoid(expected[:20]), atol=1e-5)
    # rerag still loads the same folder and scores alike
    again = RelevanceEstimator.from_pretrained(out / "estimator", max_length=512)
    assert torch.allclose(again.predict(batch[:50]), expected[:50])


def test_the_sequence_classifier_scores_as_rerag_does(causal_export):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out, estimator, written = causal_export
    folder = written["sequence_classification"]
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    assert model.config.num_labels == 1 and model.config.pad_token_id is not None
    batch = pairs(500, seed=1)
    expected = estimator.predict(batch)
    texts = [
        tok.apply_chat_template([{"role": "query", "content": q}, {"role": "document", "content": d}], tokenize=False)
        for q, d in batch
    ]
    got = []
    for i in range(0, len(texts), 50):
        enc = tok(texts[i : i + 50], add_special_tokens=False, padding=True, return_tensors="pt")
        with torch.no_grad():
            got.append(model(**enc).logits[:, 0])
    assert (torch.cat(got) - expected).abs().max() <= 1e-4


def test_the_pair_template_renders_the_res_prompt_and_keeps_the_bases_conversations(causal_export):
    from transformers import AutoTokenizer

    out, estimator, _ = causal_export
    tok = AutoTokenizer.from_pretrained(out / "estimator")
    pair = [{"role": "query", "content": "who?"}, {"role": "document", "content": "Ana was born in Soltha."}]
    structured = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in pair]
    rendered = tok.apply_chat_template(pair, tokenize=False)
    prompt = estimator.template.format(question="who?", title="", text="Ana was born in Soltha.", context="")
    assert rendered == f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
    assert tok.apply_chat_template(structured, tokenize=False) == rendered
    user = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    again = RelevanceEstimator.from_pretrained(out / "estimator")  # its tokenizer holds the pair template now
    assert pair_chat_template(again) == pair_chat_template(estimator)  # exported twice: one pair branch


def test_an_encoder_decoder_re_is_skipped_and_refused_when_named(module_kwargs, tmp_path, capsys):
    torch.manual_seed(0)
    module = RERAGModule(**module_kwargs).eval()
    assert export_serving(module.estimator, tmp_path) == {}
    assert "skipped cross_encoder: an encoder-decoder RE" in capsys.readouterr().out
    with pytest.raises(ValueError, match="sequence_classification: an encoder-decoder RE .* T5 ranker"):
        export_serving(module.estimator, tmp_path, ["sequence_classification"])


def test_a_tokenizer_that_tokenizes_pieces_otherwise_is_refused(causal_module_kwargs, tmp_path):
    """The fixture's chat tokenizer adds a prefix space at each call: rerag's body starts with one,
    the whole rendered prompt's does not."""
    torch.manual_seed(0)
    module = RERAGModule(**causal_module_kwargs).eval()
    with pytest.raises(ValueError, match="cross_encoder: the RE's prompt rendered whole and tokenized gives other"):
        export_serving(module.estimator, tmp_path, ["cross_encoder"])


def test_rerag_export_writes_every_format_and_the_card_says_what_each_returns(
    causal_module_kwargs, causal_data_kwargs, whole_tokenizer_dir, tmp_path, capsys
):
    import lightning as L

    from rerag.cli import main
    from rerag.data.datamodule import RERAGDataModule
    from tests.rerag.helpers import fit_and_checkpoint

    L.seed_everything(0)
    tokenizers = {"inputs.re_tokenizer": whole_tokenizer_dir, "inputs.generator_tokenizer": whole_tokenizer_dir}
    module = RERAGModule(**changed(causal_module_kwargs, tokenizers))
    data = RERAGDataModule(**changed(causal_data_kwargs, tokenizers))
    assert data.inputs == module.inputs  # the datamodule tokenizes as the models read
    checkpoint = fit_and_checkpoint(module, data, tmp_path)
    main(["export", "--checkpoint", checkpoint, "--out", str(tmp_path / "export")])
    assert f"sequence_classification: {tmp_path / 'export' / 'sequence_classification'}" in capsys.readouterr().out
    card = (tmp_path / "export" / "estimator" / "README.md").read_text()
    assert "sigmoid(s), or s with `activation_fn=torch.nn.Identity()`" in card
    assert "vLLM's `/rerank`\nand `/score` return sigmoid(s)" in card
    main(["export", "--checkpoint", checkpoint, "--out", str(tmp_path / "narrow"), "--serving", "[]"])
    assert not (tmp_path / "narrow" / "sequence_classification").exists()
    assert not (tmp_path / "narrow" / "estimator" / "modules.json").exists()


def test_a_platt_calibration_is_folded_into_both_formats_and_an_isotonic_one_refused(causal_export, capsys):
    """After `rerag calibrate` (here: its calibration set by hand), the CrossEncoder returns the
    calibrated P = sigmoid(a s + b) and the sequence classifier's logit is a s."""
    from sentence_transformers import CrossEncoder
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rerag.infer.serving import update_serving
    from rerag.models.calibration import Calibration, IsotonicCalibrator, PlattCalibrator

    out, estimator, _ = causal_export
    batch = pairs(100, seed=2)
    s = estimator.predict(batch)
    platt = PlattCalibrator(a=2.5, b=-0.75)
    platt.fitted_on = {"n": 1, "positives": 1, "source": "test"}
    estimator.calibration = Calibration(per_context=platt)
    assert set(update_serving(estimator, out / "estimator")) == {"cross_encoder", "sequence_classification"}
    served = torch.as_tensor(CrossEncoder(str(out / "estimator")).predict(batch))
    assert (served - torch.sigmoid(2.5 * s - 0.75)).abs().max() <= 1e-5
    folder = out / "sequence_classification"
    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForSequenceClassification.from_pretrained(folder)
    messages = [{"role": "query", "content": batch[0][0]}, {"role": "document", "content": batch[0][1]}]
    enc = tok(tok.apply_chat_template(messages, tokenize=False), add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        assert model(**enc).logits[0, 0].item() == pytest.approx(2.5 * s[0].item(), abs=1e-4)

    isotonic = IsotonicCalibrator(x=[-1.0, 1.0], y=[0.2, 0.8])
    isotonic.fitted_on = {"n": 1, "positives": 1, "source": "test"}
    estimator.calibration = Calibration(per_context=isotonic)
    assert update_serving(estimator, out / "estimator") == {}
    assert "left as they were (uncalibrated): cross_encoder: the isotonic calibration" in capsys.readouterr().out


def test_the_rerankers_t5_ranker_scores_a_t5_re_as_rerag_does(module_kwargs, tmp_path):
    """rerankers' T5Ranker with the card's arguments returns sigmoid(s) on the exported T5 RE's folder."""
    from rerankers.models.t5ranker import T5Ranker

    from rerag.infer.serving import t5_ranker_arguments

    torch.manual_seed(0)
    module = RERAGModule(**module_kwargs).eval()
    export(module.estimator, module.generator, tmp_path / "export")
    estimator = RelevanceEstimator.from_pretrained(tmp_path / "export" / "estimator", max_length=512)
    ranker = T5Ranker(
        str(tmp_path / "export" / "estimator"),
        verbose=0,
        dtype=torch.float32,
        device="cpu",
        **t5_ranker_arguments(estimator),
    )
    question, passages = "who founded the city?", [p for _, p in pairs(60, seed=3)]
    got = torch.tensor(ranker._get_scores(question, passages))
    assert (got - torch.sigmoid(estimator.score(question, passages))).abs().max() <= 1e-5
    from rerag.infer.model_card import estimator_card

    card = estimator_card(estimator)
    assert 'T5Ranker("path/to/estimator", token_true=' in card


def python_blocks(card: str) -> list[str]:
    return [block.split("```", 1)[0] for block in card.split("```python\n")[1:]]


@pytest.mark.parametrize("kind", ["causal", "t5"])
def test_every_python_snippet_of_the_card_runs(
    kind, causal_module_kwargs, module_kwargs, whole_tokenizer_dir, tmp_path
):
    """The card's snippets (rerag, plain transformers, and per format sentence-transformers or rerankers)
    run as printed, on the exported folder."""
    from rerag.infer.model_card import estimator_card

    torch.manual_seed(0)
    tokenizers = {"inputs.re_tokenizer": whole_tokenizer_dir, "inputs.generator_tokenizer": whole_tokenizer_dir}
    module = RERAGModule(**(changed(causal_module_kwargs, tokenizers) if kind == "causal" else module_kwargs)).eval()
    export(module.estimator, module.generator, tmp_path / "export")
    estimator = RelevanceEstimator.from_pretrained(tmp_path / "export" / "estimator")
    card = estimator_card(estimator, serving=list(export_serving(estimator, tmp_path / "export")))
    blocks = python_blocks(card)
    assert len(blocks) == 3  # rerag, transformers, and sentence-transformers or rerankers
    for block in blocks:
        code = block.replace("path/to/estimator", str(tmp_path / "export" / "estimator")).replace('"..."', '"who?"')
        exec(compile(code, "card", "exec"), {})


def test_a_windowed_res_card_reports_both_ways_and_the_longest_equal_input(module_kwargs):
    """An RE that scores windows: the card gives the test metrics of best-window scoring (rerag's) beside
    those of whole passages (a server's), and names the longest input that scores the same both ways."""
    from rerag.infer.model_card import estimator_card

    estimator = RERAGModule(**module_kwargs).estimator
    estimator.context_words = 60
    windows, whole = {"test/re_gold_recall@1": 0.77, "global_step": 3}, {"test/re_gold_recall@1": 0.7125}
    card = estimator_card(estimator, metrics=windows, serving=["cross_encoder"], whole_passage_metrics=whole)
    assert "| metric | best window of 60 words (rerag) | whole passages (a server) |" in card
    assert "| test/re_gold_recall@1 | 0.7700 | 0.7125 |" in card
    assert f"a passage of at most 60 words whose prompt fits in {estimator.max_length} tokens" in card
    assert "| test/re_gold_recall@1 | 0.7700 |\n" in estimator_card(estimator, metrics=windows) + "\n"
