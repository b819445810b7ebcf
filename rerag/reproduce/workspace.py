"""The runs the tables share, each cached in the output folder under a hash of what made it.

A table asks the workspace for a trained model, its exported folders, its calibration or its
predictions; the first ask runs it (with the same code as the `rerag` subcommands) and writes
`done.json` into `OUT/runs/<name>-<hash>/`, later asks, in this run or a later one, read it back.
Changing a setting changes the hash, so a stale result is never reused.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from erag.lm import resolve

SHIPPED_DEMO_CONFIG = "rerag:configs/demo.yaml"  # the demo config inside the installed package
DEMO_CONFIG = Path(resolve(SHIPPED_DEMO_CONFIG)).resolve()
DEMO_DATA = "data/demo"  # where `rerag fit --config configs/demo.yaml` writes its world
DEFAULT_TOP_K = 5  # contexts the RE keeps for answers and confidence (the paper: 25)


@dataclass(frozen=True)
class Scale:
    """How much each table trains and evaluates.

    fit_steps: optimizer steps of the main RE-RAG model (None: the config's own).
    ablation_steps: optimizer steps of each ablation and baseline model.
    questions: questions per split read by EoR and eRAG (None: all).
    overrides: `rerag fit` arguments applied to every model (e.g. a smaller world).
    seeds: the seeds (`seed_everything` and the data's order) of the runs of the tables one run
        cannot decide (RE-RAG Tables 6, 7 and 8), their verdicts pooled over them.
    """

    fit_steps: int | None
    ablation_steps: int
    questions: int | None
    overrides: dict[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)


SCALES = {
    # A few steps on a world of a few questions: the mechanics, for CI.
    "toy": Scale(
        fit_steps=4,
        ablation_steps=4,
        questions=8,
        overrides={
            "data.init_args.world.n_train_people": 12,
            "data.init_args.world.n_dev_people": 4,
            "data.init_args.world.n_test_people": 4,
            "data.init_args.world.n_train_contexts": 20,
            "data.init_args.world.n_eval_contexts": 20,
            "data.init_args.n_train_contexts": 4,
            "data.init_args.n_deep_contexts": 2,
            "data.init_args.deep_context_depth": 20,
            "data.init_args.n_eval_contexts": 20,
            "model.evaluation.recall_ks": [1, 5, 10, 20],
            "model.evaluation.eval_depths": [10],
            "validation.every_n_steps": 4,
            "trainer.limit_val_batches": 1,
        },
    ),
    # The demo's world and models, shortened training: the whole paper set within an hour on 2 cores.
    "quick": Scale(fit_steps=600, ablation_steps=200, questions=100, overrides={"validation.every_n_steps": 300}),
    # The demo's settings, three seeds where one run cannot decide.
    "full": Scale(fit_steps=None, ablation_steps=1200, questions=None, seeds=(0, 1, 2)),
}


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:10]


def file_digest(path: str | Path) -> str:
    """A hash of a file's bytes: a step that reads a checkpoint is keyed by its weights, not its path,
    so a model retrained into the same folder never reuses results of the old one."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:16]


class Workspace:
    """One output folder, one scale, one base config; the cache of every step the tables run."""

    def __init__(
        self,
        out: str | Path,
        scale: str = "quick",
        config: str | Path = SHIPPED_DEMO_CONFIG,
        data_dir: str | None = None,
        top_k: int = DEFAULT_TOP_K,
        llm: str | None = None,
    ):
        self.out, self.scale_name, self.config = Path(out), scale, Path(resolve(str(config)))
        self.scale = SCALES[scale]
        self.top_k, self.llm = top_k, llm
        self.data_dir = data_dir or str(self.out / "data" if scale == "toy" else DEMO_DATA)
        self.used: list[dict] = []  # every step asked for (run or read back), for the times report

    def step(self, name: str, key: Any, run: Callable[[Path], dict]) -> dict:
        """Run `run(folder)` once per (name, key): its dict, plus `seconds`, is kept in folder/done.json."""
        folder = self.out / "runs" / f"{name}-{digest([name, key])}"
        done = folder / "done.json"
        reused = done.exists()
        if reused:
            result = json.loads(done.read_text())
        else:
            folder.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            result = run(folder)
            result = {**result, "folder": str(folder), "seconds": round(time.perf_counter() - start, 1)}
            done.write_text(json.dumps(result, indent=2) + "\n")
        self.used.append(
            {
                "name": name,
                "folder": str(folder),
                "seconds": result["seconds"],
                "reused": reused,
                "seed": result.get("seed"),
            }
        )
        return result

    def options(self) -> str:
        """The `rerag reproduce` arguments besides paper, tables and scale that made this workspace."""
        given = {
            "--fit_config": None if self.config.resolve() == DEMO_CONFIG else self.config,
            "--data_dir": None if self.scale_name == "toy" or self.data_dir == DEMO_DATA else self.data_dir,
            "--top_k": None if self.top_k == DEFAULT_TOP_K else self.top_k,
            "--llm": self.llm,
        }
        return "".join(f" {flag} {value}" for flag, value in given.items() if value is not None)

    def main(self, seed: int = 0) -> dict:
        """The main RE-RAG model of every paper's tables: the config trained for the scale's steps,
        tested (with `seed`, another run of it)."""
        return self.fit("rerag", test=True, seed=seed)

    def path(self, paper: str, name: str) -> str:
        """Where a table or figure file of `paper` goes: OUT/<paper>/<name>."""
        (self.out / paper).mkdir(parents=True, exist_ok=True)
        return str(self.out / paper / name)

    # -- training ---------------------------------------------------------------------------------

    def fit(
        self,
        name: str,
        steps: int | None = None,
        validate: bool = True,
        test: bool = False,
        overlay: str | None = None,
        seed: int = 0,
        **model: Any,
    ) -> dict:
        """Train RE-RAG on the config (and on top of it the config file `overlay`, e.g. the paper
        reference) with `model.*` overrides for `steps` (default: the scale's main run). Returns its checkpoint (best by dev EM, or the last without validation), the last
        validation's val/* and, with `test`, the test/* of the checkpoint (and `rerag test`'s
        per-question results in its folder). A `seed` other than the config's 0 seeds the weights
        and the data's order."""
        steps = steps if steps is not None else self.scale.fit_steps
        overrides = {
            **self.scale.overrides,
            "data.init_args.data_dir": self.data_dir,
            **{f"model.{k}": v for k, v in model.items()},
        }
        if seed:  # seed 0 adds nothing, so that the runs cached before seeds existed stay valid
            overrides |= {"seed_everything": seed, "data.init_args.seed": seed}
        if steps is not None:  # validated after the last step too (`ValidationSchedule`)
            overrides["trainer.max_steps"] = steps
        if not validate:
            overrides["trainer.limit_val_batches"] = 0
        configs = [self.config] + ([Path(resolve(overlay))] if overlay else [])
        key = {"config": [yaml.safe_load(c.read_text()) for c in configs], "overrides": overrides, "test": test}
        if not overlay:  # the key a run had before overlays existed, so that its cached steps stay valid
            key["config"] = key["config"][0]
        return self.step(name, key, lambda folder: _fit(configs, overrides, folder, test))

    # -- the `rerag` subcommands on a trained model -------------------------------------------------

    def exported(self, run: dict) -> Path:
        from rerag.infer.export import export, load_checkpoint

        done = self.step(
            "export",
            [run["checkpoint"], file_digest(run["checkpoint"])],
            lambda folder: {k: str(v) for k, v in export(*load_checkpoint(run["checkpoint"]), folder).items()},
        )
        return Path(done["folder"])

    def split_file(self, split: str) -> str:
        return str(Path(self.data_dir) / f"{split}.jsonl")

    def calibrated(self, run: dict, top_k: int, depth: int | None = None) -> dict:
        """`rerag calibrate` on dev, reported on test: the report, and the RE folder now calibrated."""
        from rerag.infer.calibration import calibrate_saved

        def go(folder: Path) -> dict:
            estimator = folder / "estimator"
            _copy(self.exported(run) / "estimator", estimator)
            report, _ = calibrate_saved(
                str(estimator), self.split_file("dev"), str(folder), top_k, depth, test=self.split_file("test")
            )
            return {"estimator": str(estimator), "report": report}

        return self.step("calibrate", [run["checkpoint"], file_digest(run["checkpoint"]), top_k, depth], go)

    def predictions(
        self,
        run: dict,
        split: str,
        top_k: int,
        depth: int | None = None,
        calibrated: bool = True,
        mode: str = "rag",
        llm: str | None = None,
    ) -> list[dict]:
        """`rerag predict-file` on a split, with the calibrated RE (or the raw one)."""
        from rerag.infer.predict import predict_saved

        def go(folder: Path) -> dict:
            estimator = (
                self.calibrated(run, top_k, depth)["estimator"] if calibrated else str(self.exported(run) / "estimator")
            )
            export_dir = folder / "model"
            _link(Path(estimator), export_dir / "estimator")
            _link(self.exported(run) / "generator", export_dir / "generator")
            predict_saved(
                input=self.split_file(split),
                output=str(folder / "predictions.jsonl"),
                export_dir=str(export_dir),
                top_k=top_k,
                depth=depth,
                mode=mode,
                llm=llm,
            )
            return {"predictions": str(folder / "predictions.jsonl")}

        key = [run["checkpoint"], file_digest(run["checkpoint"]), split, top_k, depth, calibrated, mode, llm]
        done = self.step("predict", key, go)
        return [json.loads(line) for line in Path(done["predictions"]).read_text().splitlines() if line.strip()]


def _copy(source: Path, target: Path) -> None:
    import shutil

    shutil.copytree(source, target, dirs_exist_ok=True)


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.symlink_to(source.resolve(), target_is_directory=True)


def _fit(configs: list[Path], overrides: dict[str, Any], folder: Path, test: bool) -> dict:
    """`rerag fit` with its outputs in `folder` (and, with `test`, `rerag test` of its checkpoint)."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from rerag.callbacks import LearningCurve, MetricsWriter
    from rerag.fit_config import build_fit

    args = [
        *(arg for config in configs for arg in ("--config", str(config))),
        "--trainer.default_root_dir",
        str(folder),
        "--trainer.logger.init_args.save_dir",
        str(folder),
    ]
    for name, value in overrides.items():
        args += [f"--{name}", json.dumps(value) if not isinstance(value, str) else value]
    cli = build_fit(args)
    for callback in cli.trainer.callbacks:  # every file the run writes goes into its folder
        if isinstance(callback, ModelCheckpoint):
            callback.dirpath = str(folder / "checkpoints")
        elif isinstance(callback, MetricsWriter):
            callback.path, callback.results = folder / "test_metrics.json", folder / "test_results.jsonl"
        elif isinstance(callback, LearningCurve):
            callback.path = folder / "learning_curve"
    trainer, model, data = cli.trainer, cli.model, cli.datamodule
    trainer.fit(model, datamodule=data)
    best = trainer.checkpoint_callback.best_model_path or str(folder / "checkpoints" / "last.ckpt")
    val = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    tested = trainer.test(model, datamodule=data, ckpt_path=best, verbose=False)[0] if test else {}
    return {
        "checkpoint": best,
        "steps": trainer.global_step,
        "seed": cli.config.get("seed_everything"),
        "val": val,
        "test": {k: float(v) for k, v in tested.items()},
    }
