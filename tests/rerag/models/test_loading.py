"""rerag.models.loading: `architecture` gives a random-init copy of a saved model's shape."""

import pytest
import torch

from erag.lm import load_tokenizer
from rerag.models.loading import ModelSpec, architecture, build_model
from tests.rerag.conftest import TINY_LLAMA, TINY_T5, chat_tokenizer_dir, tokenizer_dir  # noqa: F401 (fixtures)


@pytest.mark.parametrize("shape", [TINY_T5, TINY_LLAMA], ids=["t5", "llama"])
def test_architecture_of_a_saved_model_rebuilds_its_random_init(tmp_path, chat_tokenizer_dir, shape):
    tokenizer = load_tokenizer(chat_tokenizer_dir)
    torch.manual_seed(0)
    original = build_model(ModelSpec(config=shape), tokenizer)
    with torch.no_grad():
        for p in original.parameters():
            p.add_(1.0)  # "pretrained": the weights moved, the shape did not
    original.save_pretrained(tmp_path / "saved")
    copied = architecture(ModelSpec(name_or_path=str(tmp_path / "saved")))
    assert "vocab_size" not in copied and copied["model_type"] == shape["model_type"]  # the tokenizer gives those
    torch.manual_seed(0)
    fresh = build_model(ModelSpec(config=copied), tokenizer).state_dict()
    torch.manual_seed(0)
    expected = build_model(ModelSpec(config=shape), tokenizer).state_dict()
    assert fresh.keys() == expected.keys()
    assert all(torch.equal(fresh[k], expected[k]) for k in expected)  # the same init, not the saved weights
    assert architecture(ModelSpec(config=shape)) == shape


@pytest.mark.parametrize(
    "spec, message",
    [
        (ModelSpec(), r"model\.estimator: needs exactly one of name_or_path and config"),
        (ModelSpec(name_or_path="x", config=dict(TINY_T5)), r"model\.estimator: needs exactly one"),
        (ModelSpec(config=dict(TINY_T5), dtype="bfloat"), r"model\.estimator\.dtype: 'bfloat' is not a torch dtype"),
        (ModelSpec(config=dict(TINY_T5), dtype="Tensor"), r"model\.estimator\.dtype: 'Tensor' is not a torch dtype"),
    ],
)
def test_a_spec_no_model_can_be_built_from_is_a_clear_error_naming_its_field(spec, message):
    with pytest.raises(ValueError, match=message):
        spec.check("model.estimator")


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", None])
@pytest.mark.parametrize("source", ["config", "saved"])
def test_a_valid_spec_passes_its_check_and_builds_its_model(tmp_path, tokenizer_dir, source, dtype):
    """What passes the check builds: a config or a saved folder, in the dtype asked (None: float32, as
    built or saved)."""
    tokenizer = load_tokenizer(tokenizer_dir)
    if source == "config":
        spec = ModelSpec(config=dict(TINY_T5), dtype=dtype)
    else:
        build_model(ModelSpec(config=dict(TINY_T5)), tokenizer).save_pretrained(tmp_path / "saved")
        spec = ModelSpec(name_or_path=str(tmp_path / "saved"), dtype=dtype)
    assert spec.check("model.estimator") is None  # no error
    model = build_model(spec, tokenizer)
    want = getattr(torch, dtype) if dtype else torch.float32
    assert {p.dtype for p in model.parameters()} == {want}
    assert model.config.d_model == TINY_T5["d_model"] and model.training
