"""benchmarks/seed_sweep.py: each seed's config writes below its own folder and shares the rest, the
table reads each seed's results against the retriever's order, and a sweep of `rerag fit` and
`rerag test` over two seeds and two test files fills it. Offline: tiny Llama, the tiny world."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import yaml

from tests.rerag.conftest import chat_tokenizer_dir, tokenizer_dir, world_dir  # noqa: F401 (fixtures)
from tests.rerag.helpers import write_config

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("seed_sweep", ROOT / "benchmarks" / "seed_sweep.py")
seed_sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed_sweep)


def with_gold(src: Path, dst: Path) -> Path:
    """The file with its first answer-holding context of each question marked gold (the tiny world has none)."""
    with open(dst, "w") as out:
        for line in open(src):
            r = json.loads(line)
            for c in r["ctxs"]:
                c["gold"] = False
            first = next((c for c in r["ctxs"] if c["has_answer"]), None)
            if first is not None:
                first["gold"] = True
            out.write(json.dumps(r) + "\n")
    return dst


@pytest.mark.parametrize("name", ["squad_smollm2.yaml", "squad_smollm2_teacher.yaml"])
def test_a_seeds_config_moves_every_output_and_keeps_the_shared_cache(name, tmp_path):
    text = seed_sweep.merged_config([str(ROOT / "configs" / c) for c in ("squad_smollm2_base.yaml", name)])
    root = yaml.safe_load(text)["trainer"]["default_root_dir"]
    config = yaml.safe_load(seed_sweep.seed_config(text, root, str(tmp_path / "seed3")))
    trainer = config["trainer"]
    paths = [trainer["default_root_dir"], trainer["logger"]["init_args"]["save_dir"]]
    paths += [v for c in trainer["callbacks"] for k, v in c["init_args"].items() if k in ("dirpath", "path", "results")]
    assert len(paths) == 6 and all(p.startswith(str(tmp_path / "seed3")) for p in paths)
    assert config["model"]["teacher"]["cache_dir"] == "outputs/teacher_cache"  # every seed reads one cache
    assert seed_sweep.kept_checkpoint(config).parent == tmp_path / "seed3" / "checkpoints"
    assert seed_sweep.written_results(config) == tmp_path / "seed3" / "test_results.jsonl"


def test_a_path_that_only_begins_with_the_root_is_left_alone():
    text = "a: outputs/squad_smollm2\nb: outputs/squad_smollm2/x.json\nc: outputs/squad_smollm2_teacher/y\n"
    assert seed_sweep.seed_config(text, "outputs/squad_smollm2", "out/s0") == (
        "a: out/s0\nb: out/s0/x.json\nc: outputs/squad_smollm2_teacher/y\n"
    )


def result(i: int, re_gold: int, bm25_gold: int, f1: float, f1_bm25: float) -> dict:
    hits = {"re": {"gold": re_gold, "has_answer": re_gold}, "retriever": {"gold": bm25_gold, "has_answer": bm25_gold}}
    return {
        "id": f"q{i}",
        "first_hit": hits,
        "em": 0.0,
        "f1": f1,
        "em_retriever_order": 0.0,
        "f1_retriever_order": f1_bm25,
    }


def test_the_table_reads_each_seed_against_the_retriever_and_averages_them(tmp_path):
    # seed 0: the RE first on 3 of 4 where BM25 is on 2; seed 1: the RE on 1 of 4
    runs = {0: [(1, 1), (1, 2), (1, 1), (3, 2)], 1: [(2, 1), (1, 2), (4, 1), (3, 2)]}
    for seed, hits in runs.items():
        (tmp_path / f"seed{seed}").mkdir()
        lines = [json.dumps(result(i, re, bm, 0.5 * (re == 1), 0.25)) for i, (re, bm) in enumerate(hits)]
        (tmp_path / f"seed{seed}" / seed_sweep.results_name("data/x/test.jsonl")).write_text("\n".join(lines))
    rows = seed_sweep.seed_rows(tmp_path, [0, 1, 2], ["data/x/test.jsonl"])  # seed 2 has no results: left out
    assert [r["seed"] for r in rows] == [0, 1]
    assert rows[0]["gold R@1"][:3] == (0.75, 0.5, 0.25) and rows[1]["gold R@1"][:3] == (0.25, 0.5, -0.25)
    assert rows[0]["F1"][:3] == (0.375, 0.25, 0.125)
    text = seed_sweep.table(rows)
    assert "| data/x/test.jsonl | 0 | 4 | 0.750 | 0.500 | +0.250 [" in text
    assert "| data/x/test.jsonl | mean of 2 | | 0.500 | 0.500 | +0.000 | 0.250 | 0.250 | +0.000 |" in text


@pytest.mark.slow
def test_a_sweep_fits_and_tests_each_seed_on_every_file(tmp_path, world_dir, chat_tokenizer_dir):  # noqa: F811
    test_file, other = with_gold(world_dir / "test.jsonl", tmp_path / "test.jsonl"), tmp_path / "other" / "test.jsonl"
    other.parent.mkdir()
    other.write_text("\n".join((tmp_path / "test.jsonl").read_text().splitlines()[:6]))  # another file: 6 questions
    config = yaml.safe_load(write_config(tmp_path / "c.yaml", world_dir, chat_tokenizer_dir).read_text())
    root = str(tmp_path / "runs" / "base")
    config["test_after_fit"] = True
    config["trainer"] |= {"max_steps": 2, "limit_val_batches": 1, "limit_test_batches": 2, "default_root_dir": root}
    config["trainer"] |= {"enable_checkpointing": True, "enable_progress_bar": False}
    config["trainer"]["callbacks"] = [
        {
            "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {"dirpath": f"{root}/ckpt", "filename": "final"},
        },
        {
            "class_path": "rerag.callbacks.MetricsWriter",
            "init_args": {"path": f"{root}/m.json", "results": f"{root}/r.jsonl"},
        },
    ]
    config["data"]["init_args"]["test_file"] = str(test_file)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "sweep"

    seed_sweep.main(
        ["--config", str(tmp_path / "c.yaml"), "--seeds", "0", "1", "--parallel", "2"]
        + ["--out", str(out), "--test-files", str(other), "--", "--trainer.max_steps", "1"]
    )

    assert json.loads((out / "status.json").read_text()) == {"seed0": "finished", "seed1": "finished"}
    for seed in (0, 1):
        folder = out / f"seed{seed}"
        assert (folder / "ckpt" / "final.ckpt").is_file() and not (tmp_path / "runs" / "base").exists()
        checkpoint = torch.load(folder / "ckpt" / "final.ckpt", map_location="cpu", weights_only=False)
        assert checkpoint["global_step"] == 1  # the arguments after -- reached the fit
        assert len((folder / seed_sweep.results_name(str(test_file))).read_text().splitlines()) == 8  # 2 batches of 4
        assert len((folder / seed_sweep.results_name(str(other))).read_text().splitlines()) == 6
    table = (out / "sweep.md").read_text()
    assert table.count("| 0 |") == 2 and table.count("| 1 |") == 2 and table.count("mean of 2") == 2
    assert "gold R@1" in table
