"""Run by test_ddp.py as a script: a 2-process DDP (gloo) fit of tiny models on CPU.

Rank zero writes the synced validation metrics and the final weights for the test to compare
with a single-process validation. Lightning re-launches this script for rank 1, so it must
be a file, not `python -c`."""

import json
import os
import sys

import lightning as L
import torch

from rerag.assembly import AssemblySpec
from rerag.data.datamodule import RERAGDataModule
from rerag.evaluation import EvaluationSpec
from rerag.inputs import InputSpec
from rerag.models.loading import ModelSpec
from rerag.models.lora import LoraSpec
from rerag.module import RERAGModule
from rerag.optimization import OptimizerSpec
from rerag.stages import RE_ALONE
from rerag.teacher_cache import TeacherSpec


def build(
    world_dir, tokenizer_dir, config: dict, shared_base: bool, teacher: TeacherSpec | None = None
) -> tuple[RERAGModule, RERAGDataModule]:
    """The fit's module and datamodule (with `shared_base`: one base, adapters "re" and "generator";
    `config` a causal LM's; with `teacher`, the RE alone against the frozen generator's cache), also what
    the test validates the trained weights with."""
    lora = LoraSpec(r=2, dropout=0.0) if shared_base else None
    inputs = InputSpec(
        re_tokenizer=tokenizer_dir,
        generator_tokenizer=tokenizer_dir,
        re_max_length=64,
        generator_max_length=64,
        max_answer_length=8,
    )
    module = RERAGModule(
        ModelSpec(config=config),
        None if shared_base else ModelSpec(config=config),
        inputs,
        optimizer=OptimizerSpec(lr=1e-2),
        assembly=AssemblySpec(estimator_lora=lora, generator_lora=lora, shared_base=shared_base),
        evaluation=EvaluationSpec(val_top_k=3, test_top_k=3, recall_ks=[1, 5]),
        **({"stages": RE_ALONE, "teacher": teacher} if teacher else {}),
    )
    data = RERAGDataModule(
        train_file=f"{world_dir}/train.jsonl",
        val_file=f"{world_dir}/dev.jsonl",
        inputs=inputs,
        n_train_contexts=4,
        n_eval_contexts=12,
        batch_size=2,
        eval_batch_size=2,
    )
    return module, data


def ddp_trainer(out_dir: str, **overrides) -> L.Trainer:
    """Two CPU processes under DDP for two training batches, nothing logged or saved."""
    settings = dict(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=1,
        limit_train_batches=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=out_dir,
    )
    return L.Trainer(**settings | overrides)


if __name__ == "__main__":
    out_dir, world_dir, tokenizer_dir, config = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    shared_base = sys.argv[5:] == ["shared_base"]  # one base, adapters "re" and "generator" (config: a causal LM)
    L.seed_everything(0)
    module, data = build(world_dir, tokenizer_dir, config, shared_base)
    if os.environ.get("LOCAL_RANK", "0") == "0":  # Lightning re-launches this script for rank 1 with LOCAL_RANK=1
        torch.save(module.state_dict(), f"{out_dir}/initial.pt")
    trainer = ddp_trainer(out_dir)
    trainer.fit(module, datamodule=data)
    if trainer.is_global_zero:
        torch.save(module.state_dict(), f"{out_dir}/weights.pt")
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        json.dump(metrics, open(f"{out_dir}/metrics.json", "w"))
