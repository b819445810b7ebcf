import filecmp
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rerag.cli import COMMANDS, main
from rerag.stages import Stage, check_stages

ROOT = Path(__file__).resolve().parents[2]


#: Every fit config a user runs, overlays after their base.
FIT_CONFIGS = [
    ["demo.yaml"],
    ["quickstart.yaml"],
    ["nq_t5_base.yaml"],
    ["nq_t5_base.yaml", "tqa_t5_large.yaml"],
    ["demo.yaml", "paper_reference.yaml"],
    ["demo.yaml", "demo_anchor.yaml"],
    ["squad_smollm2_base.yaml", "squad_smollm2.yaml"],
    ["squad_smollm2_base.yaml", "squad_smollm2_teacher.yaml"],
]


@pytest.mark.parametrize("configs", FIT_CONFIGS)
def test_configs_parse_round_trip_and_build_their_stages(configs, capsys, tmp_path):
    printed = printed_config(configs, capsys)
    # The data side's text settings (model.inputs: the tokenizers and more) are linked from the model's,
    # so they are not repeated.
    assert printed["model"]["inputs"]["re_tokenizer"] and "inputs" not in printed["data"].get("init_args", {})
    (tmp_path / "printed.yaml").write_text(yaml.safe_dump(printed))
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(tmp_path / "printed.yaml"), "--print_config"])
    assert yaml.safe_load(capsys.readouterr().out) == printed
    check_stages([Stage(**stage) for stage in printed["model"]["stages"] or [{}]])


def test_every_fit_config_is_tested():
    tested = {name for configs in FIT_CONFIGS for name in configs}
    fit_configs = {p.name for p in (ROOT / "configs").glob("*.yaml")}
    assert fit_configs == tested


def test_config_comments_state_settings_not_results():
    """A config comment says type, default and meaning; results live in docs/results.md."""
    history = re.compile(r"held out|R@1|\bcold\b|\d+ ?min\b|seed \d|BENCHMARKS|benchmarks/|\d\.\d+x|\d+%")
    for path in sorted((ROOT / "configs").rglob("*.yaml")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            comment = line.partition("#")[2]
            assert not history.search(comment), f"{path.relative_to(ROOT)}:{n} holds a result: {comment.strip()}"


def printed_config(configs: list[str], capsys) -> dict:
    """The config `rerag fit --print_config` prints for these files of configs/, stacked in order."""
    with pytest.raises(SystemExit):
        main(["fit", *(a for c in configs for a in ("--config", str(ROOT / "configs" / c))), "--print_config"])
    return yaml.safe_load(capsys.readouterr().out)


def test_the_tqa_overlay_changes_only_model_data_and_outputs(capsys):
    nq = printed_config(["nq_t5_base.yaml"], capsys)
    tqa = printed_config(["nq_t5_base.yaml", "tqa_t5_large.yaml"], capsys)
    assert tqa["model"]["estimator"]["name_or_path"] == "t5-large" and tqa["data"]["init_args"]["train_file"] == (
        "data/tqa/train.json"
    )
    assert tqa["trainer"]["logger"]["init_args"]["project"] == "rerag"  # the NQ logger's other fields stay
    assert tqa["trainer"]["callbacks"][1]["init_args"]["path"] == "outputs/tqa/test_metrics.json"
    for section in ("optimizer", "seed_everything"):
        assert tqa.get(section) == nq.get(section)
    same = {k: v for k, v in nq["model"].items() if k not in ("estimator", "generator", "inputs")}
    assert {k: tqa["model"][k] for k in same} == same
    same_inputs = {k: v for k, v in nq["model"]["inputs"].items() if k not in ("re_tokenizer", "generator_tokenizer")}
    assert {k: tqa["model"]["inputs"][k] for k in same_inputs} == same_inputs
    assert tqa["model"]["inputs"]["re_tokenizer"] == tqa["model"]["inputs"]["generator_tokenizer"] == "t5-large"
    assert tqa["trainer"]["accumulate_grad_batches"] == nq["trainer"]["accumulate_grad_batches"] == 8


def test_the_paper_reference_is_the_demo_with_the_released_codes_losses(capsys):
    """configs/paper_reference.yaml over the demo: no anchor, eq. 12's weights, the released code's two
    details, the paper's training contexts, an RE that was not relevance-pretrained; the rest the demo's."""
    demo = printed_config(["demo.yaml"], capsys)
    ref = printed_config(["demo.yaml", "paper_reference.yaml"], capsys)
    m, d = ref["model"], ref["data"]["init_args"]
    loss = m["loss"]
    assert (loss["alpha_anchor"], loss["alpha_re"], loss["alpha_tok"]) == (0.0, 1.0, 1.0)
    assert (loss["gen_reduction"], loss["re_clamp"]) == ("sum", 1e-5)
    assert (d["n_train_contexts"], d["n_deep_contexts"]) == (20, 0)
    assert m["estimator"]["name_or_path"] == "rerag:assets/reader" != demo["model"]["estimator"]["name_or_path"]
    changed = {"estimator", "loss"}
    assert {k: v for k, v in m.items() if k not in changed} == {
        k: v for k, v in demo["model"].items() if k not in changed
    }
    changed_loss = {"alpha_anchor", "gen_reduction", "re_clamp"}
    assert {k: v for k, v in loss.items() if k not in changed_loss} == {
        k: v for k, v in demo["model"]["loss"].items() if k not in changed_loss
    }


def test_paper_config_is_the_papers_setup():
    cfg = yaml.safe_load((ROOT / "configs" / "nq_t5_base.yaml").read_text())
    t, m, d = cfg["trainer"], cfg["model"], cfg["data"]["init_args"]
    assert t["devices"] * t["num_nodes"] * t["accumulate_grad_batches"] * d["batch_size"] == 64
    optimizer, loss = m["optimizer"], m["loss"]
    assert (optimizer["lr"], optimizer["weight_decay"], loss["alpha_re"], loss["alpha_tok"]) == (1e-4, 1e-3, 1.0, 1.0)
    assert (d["n_train_contexts"], d["n_eval_contexts"], m["evaluation"]["test_top_k"]) == (20, 100, 25)


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


def test_every_subcommand_resolves_to_its_function():
    from rerag.cli import command, summary

    for name in COMMANDS:
        assert callable(command(name)) and summary(name) == command(name).__doc__.strip().splitlines()[0]


def test_help_imports_no_model_library():
    code = (
        "import sys\nfrom rerag.cli import main\nmain(['--help'])\n"
        "print(sorted(m for m in ('torch', 'transformers', 'lightning', 'datasets', 'peft') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def run_cli(args, tmp_path):
    return subprocess.run(
        [sys.executable, "-m", "rerag", *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )


def user_error(args, tmp_path, *named):
    """A user error: exit 2, no traceback, the error on one line naming each of `named`."""
    out = run_cli(args, tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    error = next(line for line in out.stderr.splitlines() if "error" in line)
    assert all(name in error for name in named), error
    return out


DEMO = str(ROOT / "configs" / "demo.yaml")


@pytest.mark.parametrize(
    "args, named",
    [
        (["fit", "--config", DEMO, "--trainer.max_step", "10"], ["--trainer.max_step"]),  # a prefix is refused
        (["fit", "--config", "missing.yaml"], ["missing.yaml"]),
        (["fit", "--config", DEMO, "--model.evaluation.test_top_k", "0"], ["model.evaluation.test_top_k"]),
        (["fit", "--config", DEMO, "--model.loss.alpha_re", "-1"], ["model.loss.alpha_re"]),
        (["fit", "--config", DEMO, "--model.inputs.re_max_length", "0"], ["model.inputs.re_max_length"]),
        (["fit", "--config", DEMO, "--model.optimizer.lr", "-1"], ["model.optimizer.lr"]),
        # a setting rerag 0.2 moved into a group: refused, naming where it lives now
        (["fit", "--config", DEMO, "--model.alpha_anchor", "1"], ["model.alpha_anchor", "model.loss.alpha_anchor"]),
        (["fit", "--config", DEMO, "--model.teacher_cache_dir", "c"], ["model.teacher.cache_dir"]),
        (["fit", "--config", DEMO, "--data.init_args.re_template", "{text}"], ["model.inputs.re_template"]),
        (["fit", "--config", DEMO, "--data.init_args.n_eval_contexts", "0"], ["data.init_args.n_eval_contexts"]),
        (["compare", "--runs.a", "missing.jsonl"], ["missing.jsonl"]),
        (["make-squad", "--input", "missing.json"], ["missing.json"]),
        (["compare", "--runs.a", "x.jsonl", "--resample", "5"], ["--resample"]),
    ],
)
def test_user_errors_are_one_line_with_exit_status_2(args, named, tmp_path):
    user_error(args, tmp_path, *named)


def test_a_missing_data_file_and_malformed_yaml_name_the_field_and_file(tmp_path):
    # the frozen-teacher overlay on its base (the base holds model.teacher.cache_dir, which a TeacherSpec needs)
    squad = [
        a
        for c in ("squad_smollm2_base.yaml", "squad_smollm2_teacher.yaml")
        for a in ("--config", str(ROOT / "configs" / c))
    ]
    user_error(["test", *squad, "--data.init_args.test_file", "nope.jsonl"], tmp_path, "test_file", "nope")
    (tmp_path / "bad.yaml").write_text("trainer:\n  max_steps: [1\n")
    user_error(["fit", "--config", "bad.yaml"], tmp_path, "bad.yaml", "line 3")


def test_debug_shows_the_traceback(tmp_path):
    out = run_cli(["compare", "--runs.a", "missing.jsonl", "--debug"], tmp_path)
    assert out.returncode != 0 and "Traceback" in out.stderr


def test_an_unknown_subcommand_lists_them_all(tmp_path):
    out = run_cli(["fitt"], tmp_path)
    assert out.returncode == 2 and "unknown subcommand 'fitt'" in out.stderr
    assert all(name in out.stderr for name in (*COMMANDS, "fit", "validate", "test", "predict"))


@pytest.mark.parametrize("cls_path", ["rerag.module:RERAGModule", "rerag.data.datamodule:RERAGDataModule"])
def test_every_model_and_data_argument_has_a_meaning_in_help(cls_path):
    """`rerag fit --help` and `--data.help` show each argument's docstring line (LightningCLI reads `Args:`)."""
    import importlib
    import inspect

    import docstring_parser

    module, name = cls_path.split(":")
    cls = getattr(importlib.import_module(module), name)
    described = {p.arg_name: p.description for p in docstring_parser.parse(cls.__init__.__doc__).params}
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    assert [p for p in params if not described.get(p)] == []
    assert set(described) <= set(params)  # no stale entries
