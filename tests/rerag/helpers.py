"""Helpers shared by the RE-RAG test modules (fixtures live in conftest.py)."""

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

QUESTION = "where was Ana born?"
PASSAGES = ["Ana was born in Soltha.", {"title": "Ana", "text": "Ana kept bees."}, "Soltha has bridges."]


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
