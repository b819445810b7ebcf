import json
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule


@pytest.mark.slow
def test_ddp_validation_equals_single_process(module_kwargs, data_kwargs, world_dir, tokenizer_dir, tiny_t5, tmp_path):
    script = Path(__file__).with_name("ddp_fit.py")
    run = subprocess.run([sys.executable, str(script), str(tmp_path), str(world_dir), tokenizer_dir,
                          json.dumps(tiny_t5)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    ddp = json.loads((tmp_path / "metrics.json").read_text())

    module = RERAGModule(**module_kwargs)
    module.load_state_dict(torch.load(tmp_path / "weights.pt", weights_only=True))
    data = RERAGDataModule(**{**data_kwargs, "eval_batch_size": 2})
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    (single,) = trainer.validate(module, datamodule=data)
    assert len(ddp) >= 6 and ddp.keys() == single.keys()
    for key in ddp:
        assert ddp[key] == pytest.approx(single[key], abs=1e-6), key
