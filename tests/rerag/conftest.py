"""Fixtures and helpers for the RE-RAG tests: a tiny synthetic world, a tokenizer trained on it, tiny T5s, a short fit."""

from __future__ import annotations

import lightning as L
import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from rerag.data.datamodule import RERAGDataModule
from rerag.demo.tokenizer import train_tokenizer
from rerag.demo.world import WorldConfig, build_world, write_world
from rerag.evaluation import EvaluationSpec
from rerag.inputs import InputSpec
from rerag.models.loading import ModelSpec

TINY_T5 = dict(
    model_type="t5", d_model=32, d_ff=64, d_kv=8, num_heads=4, num_layers=1, num_decoder_layers=1, dropout_rate=0.0
)
# A tiny decoder-only LM and a chat template, as SmolLM2-style models have (special turn markers;
# the end of a turn is the EOS token).
TINY_LLAMA = dict(
    model_type="llama",
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    bos_token_id=None,
)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TINY_WORLD = WorldConfig(
    seed=1,
    n_train_people=12,
    n_dev_people=3,
    n_test_people=3,
    n_cities=10,
    n_guilds=6,
    n_train_contexts=4,
    n_eval_contexts=12,
)


@pytest.fixture
def tiny_t5():
    return dict(TINY_T5)


@pytest.fixture(scope="session")
def world_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("world")
    write_world(out, TINY_WORLD)
    return out


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory):
    corpus, questions = build_world(TINY_WORLD)
    texts = [d["text"] for d in corpus] + [q["question"] for qs in questions.values() for q in qs]
    out = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(texts, vocab_size=600).save_pretrained(str(out))
    return str(out)


@pytest.fixture(scope="session")
def chat_tokenizer_dir(tokenizer_dir, tmp_path_factory):
    """The world's tokenizer with turn markers and a chat template; the end of a turn is its EOS."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token, tok.chat_template = "<|im_end|>", CHAT_TEMPLATE
    out = tmp_path_factory.mktemp("chat_tokenizer")
    tok.save_pretrained(str(out))
    return str(out)


#: How the tests' modules evaluate: a short top-k and Recall@k within the tiny world's 12 contexts.
TINY_EVALUATION = EvaluationSpec(val_top_k=3, test_top_k=3, recall_ks=[1, 5])


def tiny_inputs(tokenizer: str, max_length: int = 64) -> InputSpec:
    """The text settings of the tests' models and datamodules: one tokenizer for both, short inputs."""
    return InputSpec(
        re_tokenizer=tokenizer,
        generator_tokenizer=tokenizer,
        re_max_length=max_length,
        generator_max_length=max_length,
        max_answer_length=8,
    )


@pytest.fixture
def inputs(tokenizer_dir):
    """The T5 tests' `InputSpec`, declared once: `module_kwargs` and `data_kwargs` both hold it."""
    return tiny_inputs(tokenizer_dir)


@pytest.fixture
def causal_inputs(chat_tokenizer_dir):
    """The causal tests' `InputSpec`: `causal_module_kwargs` and `causal_data_kwargs` both hold it."""
    return tiny_inputs(chat_tokenizer_dir, max_length=96)


@pytest.fixture
def causal_module_kwargs(causal_inputs):
    """Causal RE and causal generator, each its own tiny Llama."""
    return dict(
        estimator=ModelSpec(config=TINY_LLAMA),
        generator=ModelSpec(config=TINY_LLAMA),
        inputs=causal_inputs,
        evaluation=TINY_EVALUATION,
    )


@pytest.fixture
def causal_data_kwargs(data_kwargs, causal_inputs):
    return {**data_kwargs, "inputs": causal_inputs}


@pytest.fixture
def module_kwargs(inputs):
    return dict(
        estimator=ModelSpec(config=TINY_T5),
        generator=ModelSpec(config=TINY_T5),
        inputs=inputs,
        evaluation=TINY_EVALUATION,
    )


@pytest.fixture
def data_kwargs(world_dir, inputs):
    return dict(
        train_file=str(world_dir / "train.jsonl"),
        val_file=str(world_dir / "dev.jsonl"),
        test_file=str(world_dir / "test.jsonl"),
        inputs=inputs,
        n_train_contexts=4,
        n_eval_contexts=12,
        batch_size=4,
        eval_batch_size=4,
    )


@pytest.fixture(scope="session")
def trained_checkpoint(tmp_path_factory, world_dir, tokenizer_dir):
    """A Lightning checkpoint of tiny RE-RAG models after two training steps."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from rerag.data.datamodule import RERAGDataModule
    from rerag.module import RERAGModule

    out = tmp_path_factory.mktemp("trained")
    L.seed_everything(0)
    inputs = tiny_inputs(tokenizer_dir)
    module = RERAGModule(ModelSpec(config=TINY_T5), ModelSpec(config=TINY_T5), inputs, evaluation=TINY_EVALUATION)
    data = RERAGDataModule(
        train_file=str(world_dir / "train.jsonl"),
        inputs=inputs,
        n_train_contexts=4,
        batch_size=4,
    )
    L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=2,
        limit_val_batches=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=out, save_last=True)],
        default_root_dir=out,
    ).fit(module, datamodule=data)
    return str(out / "last.ckpt")


@pytest.fixture
def export_dir(module_kwargs, tmp_path):
    """`rerag export` folders of freshly initialised tiny models."""
    import torch

    from rerag.infer.export import export
    from rerag.module import RERAGModule

    torch.manual_seed(0)
    module = RERAGModule(**module_kwargs).eval()
    export(module.estimator, module.generator, tmp_path / "export")
    return tmp_path / "export"


def train(module, data_kwargs, tmp_path, steps, callbacks=(), precision="32-true", ckpt_path=None):
    """`steps` optimizer steps of `module` on the data (resumed from `ckpt_path`), no validation,
    nothing written but the cache and what `callbacks` write."""
    L.Trainer(
        accelerator="cpu",
        precision=precision,
        max_steps=steps,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks),
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
        default_root_dir=tmp_path,
    ).fit(module, datamodule=RERAGDataModule(**data_kwargs), ckpt_path=ckpt_path)
    return module
