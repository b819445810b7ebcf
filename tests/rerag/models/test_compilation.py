import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from transformers import AutoTokenizer

from erag.lm import encode_prompts
from rerag.models.compilation import backbone_stacks, compile_options, compile_stacks
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model
from tests.rerag.conftest import TINY_LLAMA

PAIRS = (["where was Ana born?"] * 3, ["Ana was born in Soltha.", "bees", {"title": "Ana", "text": "x y z"}])


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Dynamo caches graphs on the (shared) code objects: each test starts and ends with none."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def tiny(tokenizer_dir, config):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    return build_model(ModelSpec(config=config), tok).eval(), tok


def test_compile_options():
    assert compile_options(None) is None and compile_options(False) is None
    assert compile_options(True) == {}
    assert compile_options({"mode": "max-autotune"}) == {"mode": "max-autotune"}
    with pytest.raises(TypeError, match="torch.compile"):
        compile_options("inductor")


def test_compiling_the_hf_models_forward_would_not_reach_the_re(tokenizer_dir, tiny_t5):
    """Why the stacks are compiled: the RE never calls the Hugging Face model's forward."""
    model, tok = tiny(tokenizer_dir, tiny_t5)
    estimator = RelevanceEstimator(model, tok)
    counter = CompileCounterWithBackend("eager")
    model.compile(backend=counter)
    with torch.no_grad():
        estimator(**estimator.encode(*PAIRS))
    assert counter.frame_count == 0


@pytest.mark.parametrize("arch", ["t5", "llama"])
def test_compiled_re_scores_equal_eager_ones(tokenizer_dir, chat_tokenizer_dir, tiny_t5, arch):
    model, tok = tiny(tokenizer_dir, tiny_t5) if arch == "t5" else tiny(chat_tokenizer_dir, TINY_LLAMA)
    estimator = RelevanceEstimator(model, tok, max_length=64)
    enc = estimator.encode(*PAIRS)
    with torch.no_grad():
        eager = estimator(**enc)
    counter = CompileCounterWithBackend("aot_eager")  # traces through AOTAutograd; needs no C compiler
    compile_stacks(estimator, {"backend": counter})
    with torch.no_grad():
        compiled = estimator(**enc)
    assert len(backbone_stacks(model)) == (2 if arch == "t5" else 1)
    # T5: one graph per stack; Llama: its decoder over the rows' shared prefix, then the rows over its cache
    assert counter.frame_count == 2
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)


def test_compiled_generator_likelihoods_and_gradients_equal_eager_ones(tokenizer_dir, tiny_t5):
    model, tok = tiny(tokenizer_dir, tiny_t5)
    generator = Generator(model, tok)
    inputs = encode_prompts(tok, ["where was Ana born? Ana was born in Soltha.", "bees", "x y z"], 64)
    labels = generator.encode_answers(["Soltha", "bees", "x"])

    def loglik_and_grad():
        model.zero_grad()
        f = generator.answer_loglik(inputs["input_ids"], inputs["attention_mask"], labels)
        f.sum().backward()
        return f.detach(), model.get_encoder().block[0].layer[0].SelfAttention.q.weight.grad.clone()

    eager = loglik_and_grad()
    counter = CompileCounterWithBackend("aot_eager")
    compile_stacks(generator, {"backend": counter})
    compiled = loglik_and_grad()
    assert counter.frame_count == 2
    for c, e in zip(compiled, eager):
        torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-5)
