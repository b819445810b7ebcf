"""benchmarks/re_alone.py: the RE alone against a frozen teacher through `rerag fit`, on a tiny causal
shared-base config: only the RE's adapter trains, the teacher's F_ij are cached across runs, a
`rerag export`ed generator teaches, and `--save` pairs the trained RE with the joint run's generator.
Offline: tiny Llama, the tiny world."""

import importlib.util
import itertools
import sys
from pathlib import Path

import lightning
import pytest
import torch

import rerag
from rerag.optimization import estimator_parameters
from rerag.stages import JOINT, RE_ALONE
from tests.rerag.conftest import chat_tokenizer_dir, tokenizer_dir, world_dir  # noqa: F401 (fixtures)
from tests.rerag.helpers import write_config

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("re_alone", BENCHMARKS / "re_alone.py")
re_alone = importlib.util.module_from_spec(spec)
spec.loader.exec_module(re_alone)


def run(monkeypatch, capsys, *args: str) -> str:
    monkeypatch.setattr(sys, "argv", ["re_alone.py", *args])
    re_alone.main()
    return capsys.readouterr().out


def table(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("| ") and not line.startswith("| step")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def frozen(config: Path, cache: Path, *overrides: str):
    """The module the script fits: the RE alone against the frozen base."""
    return re_alone.build([config], [*re_alone.frozen_teacher_overrides(cache, 1), *overrides]).model


def joint_checkpoint(config: Path, path: Path):
    """A joint run's checkpoint of `config` whose generator adapter has moved off zero (its RE too)."""
    joint = re_alone.build([config], []).model
    with torch.no_grad():
        for name, p in joint.named_parameters():
            if p.requires_grad:
                p.add_(0.5 if ".generator." in name else 0.1)
    torch.save(
        {
            "state_dict": joint.state_dict(),
            "hyper_parameters": dict(joint.hparams),
            "pytorch-lightning_version": lightning.__version__,
            "rerag_version": rerag.__version__,
            "optimizer_states": [{"state": {}}],
        },
        path,
    )
    return joint


class TeacherKL(lightning.Callback):
    """KL(Q_G || P_RE) of each training batch, computed here before the module's step on it: Q_G from
    the teacher cache's F, P_RE from the RE's log-odds s = log p_true - log p_false, in float64."""

    def __init__(self):
        self.values = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        b, k = len(batch["questions"]), int(batch["n_contexts"][0])
        with torch.no_grad():
            log_pt, log_pf = module.estimator.true_false_logprobs(
                batch["re"]["input_ids"], batch["re"]["attention_mask"]
            )
        f = module.teacher_scores.lookup(batch["questions"], batch["targets"], batch["contexts"])
        log_q = f.double().view(b, k).log_softmax(-1)
        log_p = (log_pt - log_pf).double().view(b, k).log_softmax(-1)
        self.values.append(float((log_q.exp() * (log_q - log_p)).sum(-1).mean()))


def test_trains_the_re_alone_and_reads_the_cached_scores_back(
    tmp_path, monkeypatch, capsys, world_dir, chat_tokenizer_dir
):
    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    args = ["--config", str(config), "--teacher-cache", str(tmp_path / "cache")]
    args += ["--steps", "2", "--eval-every", "1", "--dev-questions", "3"]
    kl, fit = TeacherKL(), re_alone.fit
    monkeypatch.setattr(re_alone, "fit", lambda cli, *a, **k: cli.trainer.callbacks.append(kl) or fit(cli, *a, **k))
    first = run(monkeypatch, capsys, *args)
    rows = table(first)
    assert [r[0] for r in rows] == ["0", "1", "2"]  # the untrained RE, then each optimizer step
    assert "| re_recall@1 | retriever_recall@1 |" in first and "(4 questions)" in first  # one dev batch of 4
    # mean train/loss_re of each step's two batches (accumulate_grad_batches 2): the KL to the cached teacher
    assert rows[0][2] == "nan" and len(kl.values) == 4
    for step, row in enumerate(rows[1:]):
        assert float(row[2]) == pytest.approx(sum(kl.values[2 * step : 2 * step + 2]) / 2, abs=6e-4), row
    assert "written to" in first and len(list((tmp_path / "cache").glob("*.pt"))) == 1
    second = run(monkeypatch, capsys, *args)
    assert "read from" in second  # every training pair's F came from the file
    without_minutes = lambda rs: [r[:1] + r[2:] for r in rs]  # noqa: E731
    assert without_minutes(table(second)) == without_minutes(rows)  # same seed, same F: the same run


def test_only_the_re_adapter_trains(tmp_path, world_dir, chat_tokenizer_dir):
    module = frozen(write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir), tmp_path / "cache")
    trainable = {name for name, p in module.named_parameters() if p.requires_grad}
    trained = {
        name for name, p in module.named_parameters() if any(p is q for q in estimator_parameters(module.estimator))
    }
    assert trained and trained == trainable and all(".re." in name for name in trained)
    assert module.stages == RE_ALONE and module.generator.adapter != "generator"  # the bare base teaches


def test_saved_checkpoint_holds_the_trained_re_and_the_joint_runs_generator(tmp_path, world_dir, chat_tokenizer_dir):
    from rerag.infer.export import load_checkpoint

    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    joint = joint_checkpoint(config, tmp_path / "fit.ckpt")
    module = frozen(config, tmp_path / "cache", "--model.assembly.estimator_lora.r", "8")  # an RE of another shape
    with torch.no_grad():
        for p in estimator_parameters(module.estimator):
            p.add_(0.25)  # "trained" here
    re_alone.save_with_estimator(module, tmp_path / "fit.ckpt", tmp_path / "out" / "re_alone.ckpt")
    saved = torch.load(tmp_path / "out" / "re_alone.ckpt", weights_only=False)
    saved_settings = saved["hyper_parameters"]
    assert "optimizer_states" not in saved and saved_settings["assembly"]["estimator_lora"]["r"] == 8
    joint_stages = saved_settings["stages"] or JOINT  # null: the paper's joint training
    assert any("generator" in stage.models for stage in joint_stages) and saved_settings["assembly"]["generator_lora"]
    estimator, generator = load_checkpoint(tmp_path / "out" / "re_alone.ckpt")  # as rerag export and test read it
    rebuilt = estimator.model.state_dict()
    for key, value in module.estimator.model.state_dict().items():
        if ".re." in key:
            assert torch.equal(rebuilt[key], value), key
    joint_state = joint.state_dict()
    generator_keys = [k for k in joint_state if ".generator." in k]
    assert generator_keys
    for key in generator_keys:
        assert torch.equal(saved["state_dict"][key], joint_state[key]), key

    # --resume: a fresh module of the same shape starts from the saved RE
    fresh = frozen(config, tmp_path / "cache", "--model.assembly.estimator_lora.r", "8")
    assert re_alone.load_estimator(fresh, tmp_path / "out" / "re_alone.ckpt") > 0
    for key, value in module.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key


def test_an_exported_generator_teaches(tmp_path, monkeypatch, capsys, world_dir, chat_tokenizer_dir):
    from rerag.infer.export import export_checkpoint
    from rerag.models.generator import Generator
    from rerag.teacher_cache import TeacherScores, build_teacher_scores

    config = write_config(tmp_path / "tiny.yaml", world_dir, chat_tokenizer_dir)
    joint_checkpoint(config, tmp_path / "fit.ckpt")
    teacher = export_checkpoint(tmp_path / "fit.ckpt", tmp_path / "export")["generator"]
    out = run(
        monkeypatch,
        capsys,
        *("--config", str(config), "--teacher", str(teacher), "--teacher-cache", str(tmp_path / "cache")),
        *("--steps", "1", "--eval-every", "1", "--dev-questions", "4"),
        *("--checkpoint", str(tmp_path / "fit.ckpt"), "--save", str(tmp_path / "re_alone.ckpt")),
    )
    assert f"teacher {teacher}" in out and (tmp_path / "re_alone.ckpt").is_file()
    (cache,) = (tmp_path / "cache").glob("*.pt")
    cached = TeacherScores.load(cache)
    data = re_alone.build([config], []).datamodule
    data.setup("fit")
    triples = list(itertools.islice(data.teacher_triples(1), 6))  # what its one step's epoch draws
    exported = build_teacher_scores(Generator.from_pretrained(teacher), triples)
    assert exported.scores.keys() <= cached.scores.keys()
    for key, value in exported.scores.items():
        assert cached.scores[key] == pytest.approx(value, abs=1e-4)
    base, _ = frozen(config, tmp_path / "cache").frozen_teacher()  # the config's frozen generator
    assert any(abs(cached.scores[k] - v) > 1e-3 for k, v in build_teacher_scores(base, triples).scores.items())
