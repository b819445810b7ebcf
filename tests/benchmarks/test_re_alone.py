"""benchmarks/re_alone.py: the RE alone against a fixed generator, on a tiny causal shared-base
config: it trains only the RE's adapter, caches F_ij across calls, and takes the generator from a
checkpoint. Offline: tiny Llama, the tiny world."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import lightning
import pytest
import torch
import yaml

from tests.rerag.conftest import TINY_LLAMA, chat_tokenizer_dir, tokenizer_dir, world_dir  # noqa: F401 (fixtures)

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "re_alone.py"
spec = importlib.util.spec_from_file_location("re_alone", SCRIPT)
re_alone = importlib.util.module_from_spec(spec)
spec.loader.exec_module(re_alone)


def write_config(path: Path, world: Path, tokenizer: str) -> Path:
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
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
                    "re_tokenizer": tokenizer,
                    "generator_tokenizer": tokenizer,
                    "re_max_length": 96,
                    "generator_max_length": 96,
                    "max_answer_length": 8,
                    "shared_base": True,
                    "estimator_lora": lora,
                    "generator_lora": lora,
                    "lr": 0.01,
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


def run(*args: str) -> str:
    result = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def table(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("| ") and not line.startswith("| step")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def save_moved(config: Path, path: Path):
    """A module of `config` with every adapter weight moved (the RE's and the generator's), saved as
    a checkpoint's state_dict at `path`."""
    module, *_ = re_alone.build(config, [])
    with torch.no_grad():
        for p in module.parameters():
            if p.requires_grad:
                p.add_(1.0)
    torch.save({"state_dict": module.state_dict()}, path)
    return module


@pytest.mark.slow
def test_trains_the_re_alone_and_reuses_cached_scores(tmp_path, world_dir, chat_tokenizer_dir):
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    scores = tmp_path / "F.pt"
    args = [
        "--config",
        str(config),
        "--scores",
        str(scores),
        "--steps",
        "2",
        "--eval-every",
        "1",
        "--dev-questions",
        "3",
    ]
    first = run(*args)
    rows = table(first)
    assert [r[0] for r in rows] == ["0", "1", "2"]  # the untrained RE, then each optimizer step
    assert "re_has_answer" in first and "retriever_has_answer" in first
    cached = torch.load(scores)
    assert len(cached) == 8  # 2 steps x 2 accumulated batches x 2 questions, each scored once
    assert all(f.shape == (4,) and torch.isfinite(f).all() for f in cached.values())
    second = run(*args)
    assert "(8 from" in second  # every training question's F came from the file
    without_minutes = lambda rs: [r[:1] + r[2:] for r in rs]  # noqa: E731
    assert without_minutes(table(second)) == without_minutes(rows)  # same seed, same F: the same run


def test_only_the_re_adapter_trains(tmp_path, world_dir, chat_tokenizer_dir):
    module, *_ = re_alone.build(write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir), [])
    names = {name for name, p in module.named_parameters() if p.requires_grad}
    trained = {name for name, p in module.named_parameters() if any(p is q for q in module.estimator_parameters())}
    assert trained and all(".re." in name for name in trained)
    assert any(".generator." in name for name in names - trained)  # the generator's adapter is left alone


def test_generator_comes_from_the_checkpoint_and_the_re_does_not(tmp_path, world_dir, chat_tokenizer_dir):
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    trained = save_moved(config, tmp_path / "fit.ckpt")
    fresh, *_ = re_alone.build(config, [])
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    assert re_alone.load_weights(fresh, tmp_path / "fit.ckpt") > 0
    after, moved = fresh.state_dict(), trained.state_dict()
    for key in after:
        if ".generator." in key:
            assert torch.equal(after[key], moved[key]), key
        else:
            assert torch.equal(after[key], before[key]), key  # the RE adapter and the base untouched


def test_saved_checkpoint_holds_the_trained_re_and_the_checkpoints_generator(tmp_path, world_dir, chat_tokenizer_dir):
    from rerag.infer.export import load_checkpoint

    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    joint, *_ = re_alone.build(config, [])
    with torch.no_grad():
        for name, p in joint.named_parameters():
            if ".generator." in name:
                p.add_(0.5)  # the joint run's generator
    fit_ckpt = tmp_path / "fit.ckpt"
    torch.save(
        {
            "state_dict": joint.state_dict(),
            "hyper_parameters": dict(joint.hparams),
            "pytorch-lightning_version": lightning.__version__,
            "optimizer_states": [{"state": {}}],
        },
        fit_ckpt,
    )
    module, *_ = re_alone.build(config, ["--model.estimator_lora.r", "8"])  # an RE of another shape
    re_alone.load_weights(module, fit_ckpt)
    with torch.no_grad():
        for p in module.estimator_parameters():
            p.add_(0.25)  # "trained" here
    re_alone.save_with_estimator(module, fit_ckpt, tmp_path / "out" / "re_alone.ckpt")
    saved = torch.load(tmp_path / "out" / "re_alone.ckpt", weights_only=False)
    assert "optimizer_states" not in saved and saved["hyper_parameters"]["estimator_lora"]["r"] == 8
    estimator, generator = load_checkpoint(tmp_path / "out" / "re_alone.ckpt")  # as rerag export reads it
    rebuilt = estimator.model.state_dict()
    for key, value in module.estimator.model.state_dict().items():
        assert torch.equal(rebuilt[key], value), key
    for key, value in joint.state_dict().items():
        if ".generator." in key:
            assert torch.equal(module.state_dict()[key], value), key


def test_resume_loads_the_saved_re_as_well(tmp_path, world_dir, chat_tokenizer_dir):
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    saved = save_moved(config, tmp_path / "re_alone.ckpt")  # as --save writes it: both adapters trained
    fresh, *_ = re_alone.build(config, [])
    assert re_alone.load_weights(fresh, tmp_path / "re_alone.ckpt", with_estimator=True) == len(saved.state_dict())
    for key, value in saved.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key
