import json
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule
from rerag.teacher_cache import TeacherScores, TeacherSpec, build_teacher_scores
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


@pytest.mark.slow
def test_a_ddp_fit_builds_its_teacher_cache_in_shares_as_one_process_would(world_dir, tokenizer_dir, tiny_t5, tmp_path):
    """Each of 2 processes scores its share of the teacher cache; merged, it is one process's cache entry
    for entry, and a 2-process fit reading one process's cache takes the same first steps' losses."""
    two, two_log = teacher_fit(tmp_path / "two", tmp_path / "two_cache", world_dir, tokenizer_dir, tiny_t5)
    assert "share 0 of 2" in two_log and "share 1 of 2" in two_log
    key, epochs = two[0]["key"], two[0]["epochs"]
    assert [p.name for p in (tmp_path / "two_cache").iterdir()] == [f"{key}.pt"]  # the shares removed
    sharded = TeacherScores.load(tmp_path / "two_cache" / f"{key}.pt")

    L.seed_everything(0)  # the fit's models, so the frozen teacher is the same
    module, data = build(world_dir, tokenizer_dir, tiny_t5, False, teacher=TeacherSpec(str(tmp_path / "one_cache")))
    data.setup("fit")
    teacher, _ = module.frozen_teacher()
    batch_size = module.evaluation.score_batch_size
    single = build_teacher_scores(teacher, data.teacher_triples(epochs), batch_size=batch_size, key=key)
    assert len(single) > 0 and sharded.scores == single.scores
    single.save(tmp_path / "one_cache" / f"{key}.pt")

    one, one_log = teacher_fit(tmp_path / "one", tmp_path / "one_cache", world_dir, tokenizer_dir, tiny_t5)
    assert "share 0 of 2" not in one_log  # read, not built
    assert [len(rank["losses"]) for rank in one] == [2, 2]
    assert [rank["losses"] for rank in one] == [rank["losses"] for rank in two]


def teacher_fit(out: Path, cache: Path, world_dir, tokenizer_dir, config: dict) -> tuple[list[dict], str]:
    """`ddp_teacher_fit.py`'s 2-process fit with its teacher cache in `cache`: each rank's record, and the log."""
    out.mkdir()
    script = Path(__file__).with_name("ddp_teacher_fit.py")
    args = [sys.executable, str(script), str(out), str(world_dir), tokenizer_dir, json.dumps(config), str(cache)]
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)], run.stdout + run.stderr


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
