import filecmp
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rerag.cli import COMMANDS, main

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
    assert t["devices"] * t["num_nodes"] * t["accumulate_grad_batches"] * d["batch_size"] == 64
    assert (m["lr"], m["weight_decay"], m["alpha_re"], m["alpha_tok"]) == (1e-4, 1e-3, 1.0, 1.0)
    assert (d["n_train_contexts"], d["n_eval_contexts"], m["test_top_k"]) == (20, 100, 25)


def _has_comment(line: str) -> bool:
    """A YAML comment: '#' at the start or after whitespace, outside quoted strings."""
    code = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', '""', line)
    return re.search(r"(?:^|\s)#", code) is not None


def test_every_config_field_is_commented():
    paths = sorted((ROOT / "configs").rglob("*.yaml"))
    assert {"eor", "erag", "loggers"} <= {p.parent.name for p in paths}
    for path in paths:
        name = path.relative_to(ROOT)
        text = path.read_text()
        assert yaml.safe_load(text), f"{name} is empty"
        for n, line in enumerate(text.splitlines(), 1):
            body = line.strip()
            # Section keys (`trainer:`) and Lightning's class_path / init_args need no comment;
            # every value does, list items included.
            if (
                not body
                or body.startswith("#")
                or body.endswith(":")
                or body.startswith(("class_path:", "- class_path:", "init_args:"))
            ):
                continue
            assert _has_comment(line), f"{name}:{n} has no comment: {line}"


def test_wandb_logger_config_replaces_the_csv_logger_and_logs_offline(tmp_path, monkeypatch, capsys):
    import wandb
    from jsonargparse import ArgumentParser
    from lightning.pytorch.loggers import Logger, WandbLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)  # save_dir is relative: the run lands in tmp_path/outputs/wandb
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "fit",
                "--config",
                str(ROOT / "configs" / "demo.yaml"),
                "--config",
                str(ROOT / "configs" / "loggers" / "wandb.yaml"),
                "--print_config",
            ]
        )
    assert exit_.value.code == 0
    logger_config = yaml.safe_load(capsys.readouterr().out)["trainer"]["logger"]
    assert logger_config["class_path"] == "lightning.pytorch.loggers.WandbLogger"  # not a list: CSV is gone
    # init_args both loggers share are not carried over from demo.yaml's CSVLogger (name: csv).
    assert logger_config["init_args"]["name"] is None and logger_config["init_args"]["save_dir"] == "outputs"
    parser = ArgumentParser()
    parser.add_argument("--logger", type=Logger)
    logger = parser.instantiate_classes(parser.parse_object({"logger": logger_config})).logger
    assert isinstance(logger, WandbLogger) and logger.name == "rerag"
    try:
        run = logger.experiment  # wandb.init, offline: no network, no key
        assert run.settings.mode == "offline" and run.project == "rerag"
        logger.log_metrics({"train/loss": 1.0}, step=0)
    finally:
        wandb.finish()
    assert list((tmp_path / "outputs" / "wandb").glob("offline-run-*/run-*.wandb"))


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


def readme_commands() -> list[list[str]]:
    """Every `rerag SUBCOMMAND ...` the README documents: shell lines (with continuations) and
    inline code, shell syntax and comments stripped; `...` placeholders are left out."""
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    found = re.findall(r"(?:^|`|do |; )(?:time )?(?:OMP_NUM_THREADS=\d+ )?(rerag [a-z][^`\n#;]*)", text, re.M)
    commands = []
    for command in found:
        argv = command.replace("$s", "dev").split()[1:]
        if "..." not in command and argv[0] not in ("--help",) and "rerag/" not in argv[0]:
            commands.append([a for a in argv if a not in ("&&", "done")])
    return commands


@pytest.mark.parametrize("argv", readme_commands(), ids=" ".join)
def test_every_readme_command_parses(argv, capsys):
    # --print_config parses every documented argument and exits before running anything.
    flags = [] if "--print_config" in argv else ["--print_config"]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, *flags])
    assert exit_.value.code == 0, capsys.readouterr().err


def test_help_lists_every_subcommand(capsys):
    main(["--help"])
    out = capsys.readouterr().out
    for name in ("fit", "validate", "test", "predict", *COMMANDS):
        line = next(line for line in out.splitlines() if line.strip().startswith(name + " "))
        assert len(line.split(maxsplit=1)) == 2, f"{name} has no one-line description"
