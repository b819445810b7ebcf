"""ERAGCallback logs erag/<metric> during a tiny Lightning fit."""

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from erag import ERAGCallback

RETRIEVAL = {
    "q1": {"question": "color of the sky?", "documents": ["grass is green", "the sky is blue"]},
    "q2": {"question": "color of the sky?", "documents": ["the sky is blue", "snow"]},
}
EXPECTED = {"q1": ["blue"], "q2": ["blue"]}


def reader(questions, contexts):
    return ["blue" if "blue" in docs[0] else "unknown" for docs in contexts]


class BoringModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.erag_rankings = (RETRIEVAL, EXPECTED)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.layer(batch[0]).pow(2).mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(callback, tmp_path, epochs):
    data = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)
    trainer = pl.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[callback],
    )
    trainer.fit(BoringModel(), data, data)
    return trainer


def test_callback_logs_erag_metrics(tmp_path):
    callback = ERAGCallback(ranking=lambda trainer, module: module.erag_rankings, reader=reader, metrics=["P@1", "MRR"])
    trainer = fit(callback, tmp_path, epochs=1)
    assert float(trainer.callback_metrics["erag/P@1"]) == pytest.approx(0.5)
    assert float(trainer.callback_metrics["erag/MRR"]) == pytest.approx(0.75)


def test_callback_builds_reader_from_module_every_n_epochs(tmp_path):
    built = []

    def reader_fn(module):
        built.append(module.current_epoch)
        return reader

    callback = ERAGCallback(ranking="erag_rankings", reader_fn=reader_fn, metrics=["Hit@2"], every_n_epochs=2)
    trainer = fit(callback, tmp_path, epochs=3)
    assert built == [1]  # after epochs 2 only (0-based 1); never during the sanity check
    assert float(trainer.callback_metrics["erag/Hit@2"]) == 1.0
    assert callback.last_result["labels"] == {"q1": [0.0, 1.0], "q2": [1.0, 0.0]}


def test_callback_checks_its_arguments():
    with pytest.raises(ValueError, match="exactly one of reader and reader_fn"):
        ERAGCallback(ranking="x")
    with pytest.raises(ValueError, match="unknown retrieval metric"):
        ERAGCallback(ranking="x", reader=reader, metrics=["P5"])
