import json
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule
from tests.rerag.conftest import TINY_LLAMA
from tests.rerag.ddp_fit import build


@pytest.mark.slow
def test_ddp_validation_equals_single_process(module_kwargs, data_kwargs, world_dir, tokenizer_dir, tiny_t5, tmp_path):
    script = Path(__file__).with_name("ddp_fit.py")
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(world_dir), tokenizer_dir, json.dumps(tiny_t5)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ddp = json.loads((tmp_path / "metrics.json").read_text())

    module = RERAGModule(**module_kwargs)
    module.load_state_dict(torch.load(tmp_path / "weights.pt", weights_only=True))
    data = RERAGDataModule(**{**data_kwargs, "eval_batch_size": 2})
    assert_equal_metrics(ddp, validate(module, data, tmp_path))


@pytest.mark.slow
def test_ddp_trains_two_adapters_of_one_shared_base(world_dir, chat_tokenizer_dir, tmp_path):
    script = Path(__file__).with_name("ddp_fit.py")
    run = subprocess.run(
        [
            sys.executable,
            str(script),
            str(tmp_path),
            str(world_dir),
            chat_tokenizer_dir,
            json.dumps(TINY_LLAMA),
            "shared_base",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    before = torch.load(tmp_path / "initial.pt", weights_only=True)
    after = torch.load(tmp_path / "weights.pt", weights_only=True)
    changed = {n for n in after if not torch.equal(after[n], before[n])}
    assert any(".re." in n for n in changed) and any(".generator." in n for n in changed)
    assert all("lora_" in n for n in changed)  # the shared base stays frozen
    # the synced DDP metrics are a single process's validation of the trained weights
    module, data = build(world_dir, chat_tokenizer_dir, TINY_LLAMA, shared_base=True)
    module.load_state_dict(after)
    assert_equal_metrics(json.loads((tmp_path / "metrics.json").read_text()), validate(module, data, tmp_path))


def validate(module: RERAGModule, data: RERAGDataModule, root: Path) -> dict[str, float]:
    """`module`'s validation metrics on `data`, in one process on the CPU."""
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=root,
    )
    (metrics,) = trainer.validate(module, datamodule=data)
    return metrics


def assert_equal_metrics(ddp: dict[str, float], single: dict[str, float]) -> None:
    assert len(ddp) >= 6 and ddp.keys() == single.keys()
    for key in ddp:
        assert ddp[key] == pytest.approx(single[key], abs=1e-6), key
