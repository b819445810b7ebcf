"""Helpers shared by the RE-RAG test modules (fixtures live in conftest.py)."""

import dataclasses
from pathlib import Path

import lightning as L
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint

from rerag.assembly import AssemblySpec
from rerag.evaluation import EvaluationSpec
from rerag.inputs import InputSpec
from rerag.losses import LossSpec
from rerag.optimization import OptimizerSpec
from tests.rerag.conftest import TINY_LLAMA

#: The module's setting groups that have defaults, by argument name.
SPECS = {
    "inputs": InputSpec,
    "loss": LossSpec,
    "optimizer": OptimizerSpec,
    "assembly": AssemblySpec,
    "evaluation": EvaluationSpec,
}

QUESTION = "where was Ana born?"
PASSAGES = ["Ana was born in Soltha.", {"title": "Ana", "text": "Ana kept bees."}, "Soltha has bridges."]


def changed(kwargs: dict, settings: dict) -> dict:
    """A copy of `RERAGModule`'s (or `RERAGDataModule`'s) keyword arguments with `settings` applied, keyed
    as a config is (`"loss.alpha_anchor"`, `"evaluation.eval_depths"`): a group field replaced in that
    group's spec (the group's defaults where `kwargs` lack it), a plain key replacing the argument."""
    out = dict(kwargs)
    for key, value in settings.items():
        group, _, field = key.rpartition(".")
        if not group:
            out[key] = value
        else:
            out[group] = dataclasses.replace(out.get(group) or SPECS[group](), **{field: value})
    return out


def fit_and_checkpoint(module, data, tmp_path, steps=2) -> str:
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        limit_val_batches=0,
        logger=False,
        callbacks=[ckpt],
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    ).fit(module, datamodule=data)
    return str(tmp_path / "ckpt" / "last.ckpt")


def write_config(path: Path, world: Path, tokenizer: str) -> Path:
    """A `rerag fit` config of a tiny causal shared base (one tiny Llama, LoRA adapters "re" and
    "generator") on the tiny world, tokenized by `tokenizer`."""
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    inputs = {"re_tokenizer": tokenizer, "generator_tokenizer": tokenizer, "max_answer_length": 8}
    path.write_text(
        yaml.safe_dump(
            {
                "seed_everything": 0,
                "trainer": {
                    "accelerator": "cpu",
                    "logger": False,
                    "enable_checkpointing": False,
                    "accumulate_grad_batches": 2,
                    "gradient_clip_val": 1.0,
                },
                "model": {
                    "estimator": {"config": TINY_LLAMA},
                    "inputs": inputs | {"re_max_length": 96, "generator_max_length": 96},
                    "assembly": {"shared_base": True, "estimator_lora": lora, "generator_lora": lora},
                    "optimizer": {"lr": 0.01},
                },
                "data": {
                    "class_path": "rerag.data.datamodule.RERAGDataModule",
                    "init_args": {
                        "train_file": str(world / "train.jsonl"),
                        "val_file": str(world / "dev.jsonl"),
                        "n_train_contexts": 4,
                        "n_eval_contexts": 12,
                        "batch_size": 2,
                        "eval_batch_size": 4,
                    },
                },
            }
        )
    )
    return path
