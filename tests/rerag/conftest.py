"""Fixtures and helpers for the RE-RAG tests: a tiny synthetic world, a tokenizer trained on it, tiny T5s, a short fit."""

from __future__ import annotations

import lightning as L
import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from rerag.data.datamodule import RERAGDataModule
from rerag.demo.tokenizer import train_tokenizer
from rerag.demo.world import WorldConfig, build_world, write_world
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


@pytest.fixture
def causal_module_kwargs(chat_tokenizer_dir):
    """Causal RE and causal generator, each its own tiny Llama."""
    return dict(
        estimator=ModelSpec(config=TINY_LLAMA),
        generator=ModelSpec(config=TINY_LLAMA),
        re_tokenizer=chat_tokenizer_dir,
        generator_tokenizer=chat_tokenizer_dir,
        re_max_length=96,
        generator_max_length=96,
        max_answer_length=8,
        val_top_k=3,
        test_top_k=3,
        recall_ks=[1, 5],
    )


@pytest.fixture
def causal_data_kwargs(data_kwargs, chat_tokenizer_dir):
    return {
        **data_kwargs,
        "re_tokenizer": chat_tokenizer_dir,
        "generator_tokenizer": chat_tokenizer_dir,
        "re_max_length": 96,
        "generator_max_length": 96,
    }


@pytest.fixture
def module_kwargs(tokenizer_dir):
    return dict(
        estimator=ModelSpec(config=TINY_T5),
        generator=ModelSpec(config=TINY_T5),
        re_tokenizer=tokenizer_dir,
        generator_tokenizer=tokenizer_dir,
        re_max_length=64,
        generator_max_length=64,
        max_answer_length=8,
        val_top_k=3,
        test_top_k=3,
        recall_ks=[1, 5],
    )


@pytest.fixture
def data_kwargs(world_dir, tokenizer_dir):
    return dict(
        train_file=str(world_dir / "train.jsonl"),
        val_file=str(world_dir / "dev.jsonl"),
        test_file=str(world_dir / "test.jsonl"),
        re_tokenizer=tokenizer_dir,
        generator_tokenizer=tokenizer_dir,
        re_max_length=64,
        generator_max_length=64,
        max_answer_length=8,
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
    module = RERAGModule(
        ModelSpec(config=TINY_T5),
        ModelSpec(config=TINY_T5),
        tokenizer_dir,
        tokenizer_dir,
        re_max_length=64,
        generator_max_length=64,
        max_answer_length=8,
        val_top_k=3,
        test_top_k=3,
        recall_ks=[1, 5],
    )
    data = RERAGDataModule(
        train_file=str(world_dir / "train.jsonl"),
        re_tokenizer=tokenizer_dir,
        generator_tokenizer=tokenizer_dir,
        re_max_length=64,
        generator_max_length=64,
        max_answer_length=8,
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
