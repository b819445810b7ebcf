import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rerag.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("config", ["demo.yaml", "nq_t5_base.yaml", "tqa_t5_large.yaml"])
def test_configs_parse(config, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "--config", str(ROOT / "configs" / config), "--print_config"])
    assert exit_.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    # The data side's tokenizer settings are linked from the model's, so they are not repeated.
    assert printed["model"]["re_tokenizer"] and "re_tokenizer" not in printed["data"]


def test_paper_config_is_the_papers_setup():
    cfg = yaml.safe_load((ROOT / "configs" / "nq_t5_base.yaml").read_text())
    t, m, d = cfg["trainer"], cfg["model"], cfg["data"]["init_args"]
    assert t["devices"] * t["accumulate_grad_batches"] * d["batch_size"] == 64
    assert (m["lr"], m["weight_decay"], m["alpha_re"], m["alpha_tok"]) == (1e-4, 1e-3, 1.0, 1.0)
    assert (d["n_train_contexts"], d["n_eval_contexts"], m["test_top_k"]) == (20, 100, 25)


def test_every_config_field_is_commented():
    for path in (ROOT / "configs").glob("*.yaml"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            body = line.strip()
            if body and not body.startswith(("#", "-", "class_path", "init_args")) and body.endswith(":") is False:
                assert "#" in line, f"{path.name}:{n} has no comment: {line}"


def test_python_dash_m_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "rerag", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "fit" in out.stdout and "predict" in out.stdout


def test_make_demo_data_is_deterministic(tmp_path):
    args = ["--seed", "3"]
    main(["make-demo-data", "--out", str(tmp_path / "a"), *args])
    main(["make-demo-data", "--out", str(tmp_path / "b"), *args])
    for split in ("corpus", "train", "dev", "test"):
        assert filecmp.cmp(tmp_path / "a" / f"{split}.jsonl", tmp_path / "b" / f"{split}.jsonl", shallow=False)
    first = json.loads((tmp_path / "a" / "dev.jsonl").read_text().splitlines()[0])
    assert len(first["ctxs"]) == 100


def test_make_tokenizer_reproduces_the_shipped_one(tmp_path):
    main(["make-tokenizer", "--out", str(tmp_path)])
    shipped = ROOT / "rerag" / "assets" / "demo_tokenizer" / "tokenizer.json"
    assert json.loads((tmp_path / "tokenizer.json").read_text()) == json.loads(shipped.read_text())
