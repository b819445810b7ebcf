"""benchmarks/re_depth.py and re_learnability.py: the demo-shaped RE from random init, alone against
the frozen generator through `rerag fit`, one run per strategy or RE tokenizer, on a tiny T5 config.
Offline: tiny T5s, the tiny world."""

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

from tests.rerag.conftest import TINY_T5, tokenizer_dir, world_dir  # noqa: F401 (fixtures)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import re_alone as their neighbour
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


re_depth, re_learnability = load("re_depth"), load("re_learnability")


def write_config(path: Path, tokenizer: str) -> Path:
    """A demo-shaped config: a T5 RE and reader, a data section the scripts point at their folder."""
    path.write_text(
        yaml.safe_dump(
            {
                "seed_everything": 0,
                "trainer": {"accelerator": "cpu", "gradient_clip_val": 1.0, "limit_val_batches": 1},
                "model": {
                    "estimator": {"config": TINY_T5},
                    "generator": {"config": TINY_T5},
                    "re_tokenizer": tokenizer,
                    "generator_tokenizer": tokenizer,
                    "re_max_length": 64,
                    "generator_max_length": 64,
                    "max_answer_length": 8,
                    "alpha_anchor": 5.0,
                    "lr": 0.01,
                    "estimator_lr": 0.0005,
                    "recall_ks": [1, 5],
                },
                "data": {
                    "class_path": "rerag.demo.datamodule.DemoDataModule",
                    "init_args": {"n_train_contexts": 2, "n_eval_contexts": 12, "batch_size": 2, "eval_batch_size": 4},
                },
            }
        )
    )
    return path


def run(script, monkeypatch, capsys, *args: str) -> str:
    monkeypatch.setattr(sys, "argv", ["script.py", *args])
    script.main()
    return capsys.readouterr().out


def table(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_strategies_map_to_the_datamodule_and_the_anchor():
    assert re_depth.strategy_overrides("top20") == [
        *("--data.init_args.n_train_contexts", "20", "--data.init_args.n_deep_contexts", "0"),
        *("--data.init_args.deep_context_depth", "null", "--model.alpha_anchor", "0.0"),
    ]
    assert re_depth.strategy_overrides("12+8@50anchor2.5")[1::2] == ["12", "8", "50", "2.5"]
    assert re_depth.strategy_overrides("12+8anchor")[-1] == "1.0"


def test_set_confidence_auroc_reads_the_modules_dev_results():
    class Module:
        results = {
            "val": [
                {"contexts": [{"re_score": s}], "first_hit": {"re": {"has_answer": rank}}}
                for s, rank in ((3.0, 1), (2.0, 5), (1.0, 6), (0.0, None))
            ]
        }

    assert re_depth.set_confidence_auroc(Module()) == {"set_auroc": 1.0}  # held: the top 2 scores
    assert re_depth.set_confidence_auroc(Module(), keep=6)["set_auroc"] == pytest.approx(1.0)


def test_re_depth_trains_each_strategy(tmp_path, monkeypatch, capsys, world_dir, tokenizer_dir):
    config = write_config(tmp_path / "tiny.yaml", tokenizer_dir)
    out = run(
        re_depth,
        monkeypatch,
        capsys,
        *("--data", str(world_dir), "--config", str(config), "--strategies", "2+2,2+2anchor", "--shallow", "5"),
        *("--train-questions", "8", "--dev-questions", "6", "--steps", "3", "--eval-every", "2"),
        *("--teacher-cache", str(tmp_path / "cache")),
    )
    assert "over the top 12 / the top 5" in out and "(6 questions)" in out
    rows = table(out)
    assert rows[0] == ["strategy", "training minutes", "0", "2", "3"]  # step 0, every 2 steps and the last
    assert [r[0] for r in rows[1:]] == ["2+2", "2+2anchor"]
    for row in rows[1:]:
        for cell in row[2:]:
            deep, shallow, _ = (float(x) for x in cell.split(" / "))
            assert 0 <= deep <= 1 and 0 <= shallow <= 1
    assert len(list((tmp_path / "cache").glob("*.pt"))) == 1  # the anchor does not change the teacher's F


def test_re_learnability_trains_each_tokenizer(tmp_path, monkeypatch, capsys, world_dir, tokenizer_dir):
    config = write_config(tmp_path / "tiny.yaml", tokenizer_dir)
    out = run(
        re_learnability,
        monkeypatch,
        capsys,
        *("--data", str(world_dir), "--config", str(config), "--tokenizers", f"{tokenizer_dir},{tokenizer_dir}"),
        *("--steps", "2", "--eval-every", "1", "--teacher-cache", str(tmp_path / "cache")),
    )
    rows = table(out)
    assert rows[0][:5] == ["RE tokenizer", "tokens per input", "training minutes", "0", "1"]
    assert len(rows) == 3 and rows[1][1:2] == rows[2][1:2] and float(rows[1][1]) > 0
    assert rows[1][3:] == rows[2][3:]  # the same tokenizer, seed and cached F: the same curve
    assert "BM25 Recall@1" in out and len(list((tmp_path / "cache").glob("*.pt"))) == 1
