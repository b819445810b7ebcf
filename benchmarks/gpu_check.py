"""Check a GPU end to end in one command: each part in its own process, in order
of value, each part's Markdown table written to the output folder as soon as the part ends.

    python benchmarks/gpu_check.py                            # all parts on CUDA, within 9 minutes
    python benchmarks/gpu_check.py --parts kernels,rerank     # some parts
    python benchmarks/gpu_check.py --cpu-dry-run --out /tmp/gc  # the same steps at toy sizes on CPU

Parts (`--parts`, default all, run in this order):
1. kernels       the Triton kernels against the eager reference (kernels/reference.py): fp32, bf16
                 and fp16, from logits and fused with the LM head, forward and backward; max errors
                 and pass/fail against the tolerances of tests/kernels/test_true_false_kernels.py.
2. kernel_bench  benchmarks/kernel.py (bf16): eager, torch.compile, Triton logits, Triton fused.
3. throughput    benchmarks/train_throughput.py at t5-base size, bf16: questions/s and MFU.
4. rerank        benchmarks/rerank.py at t5-base size, bf16: RE two-row scoring vs MonoT5-style.
5. erag_cost     eRAG Table 2 on the GPU, where its runtime is judged (the paper's speed-up is GPU
                 batching; `rerag reproduce` on a CPU leaves it not testable): `benchmarks/erag_cost.py
                 --in-process --device cuda`, a random T5-small over 64 queries x 50 documents, with
                 the table's verdict (rerag.reproduce.erag_cost.cost_verdict).
6. demo          `python -m rerag fit --config configs/demo.yaml` on the GPU in bf16-mixed,
                 shortened to --max-steps (default 250 of the config's 1500), against the CPU run.
                 Needs jsonargparse, datasets and bm25s: see docs/gpu_check.md for the wheels.

Output folder (--out, default outputs/gpu_check): `<n>_<part>.md` per part (the table, or the
error's tail when the part failed or ran out of time), `summary.md` (one row per part, rewritten
after each part), `logs/<part>.{stdout,stderr}` and the demo's metrics and CSV log under `demo/`.
Every part also prints its table. The exit code is 0 when every chosen part passed.

Each part is a subprocess (this Python, the repository on PYTHONPATH), so a crash or a CUDA OOM
ends one part, not the run. A part gets at most --part-timeout seconds, and no part starts past
--total-timeout (default 540 s, inside a 10-minute job limit); what a part printed before it was
stopped stays in its file. GPU_CHECK_FAIL=<part>[,<part>] makes the named parts fail on purpose
(for the tests).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
PARTS = ["kernels", "kernel_bench", "throughput", "rerank", "erag_cost", "demo"]
# eRAG Table 2's cells on the GPU (T5-small's shape, the paper's 50 documents of 100 words) and at toy sizes.
ERAG_COST_GPU = ["--queries", "64", "--batch-queries", "16", "--memory-queries", "2", "--repeats", "3"]
ERAG_COST_TINY = "--d-model 32 --d-ff 64 --layers 1 --heads 2 --vocab 512 --queries 2 --memory-queries 1 --docs 4"
DEMO_MODULES = ["jsonargparse", "datasets", "bm25s"]  # what `rerag fit` needs beyond the GPU image
DEMO_WHEELS = "jsonargparse docstring-parser typeshed-client datasets dill multiprocess xxhash bm25s"
# `rerag fit --config configs/demo.yaml` on 2 CPU cores (BENCHMARKS.md, "The config as shipped").
CPU_DEMO = {
    "wall": "9 min 19 s",
    "steps": 1200,
    "test/re_recall@1": 0.738,
    "test/retriever_recall@1": 0.148,
    "test/em": 0.698,
    "test/em_retriever_order": 0.262,
}
# its dev Recall@1 by step (learning_curve.json of the same config and seed)
CPU_DEMO_DEV_RECALL = {600: 0.750, 1200: 0.780}

# Tolerances of tests/kernels/test_true_false_kernels.py: log p within 1e-5 of the largest |log p|
# (at least 1); gradients within GRAD_TOL of the largest reference gradient (low precision rounds
# gradients at that scale).
VALUE_TOL = 1e-5
GRAD_TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}


# --- part 1, run in its own process: `gpu_check.py --kernels-part DEVICE [--tiny]` -------------------


def kernels_part(device_name: str, tiny: bool) -> int:
    """Print the correctness table of the Triton kernels against the reference; 1 if any row fails."""
    import torch

    import kernels
    from kernels import reference

    device = torch.device(device_name)
    if tiny:  # Triton's interpreter (the CPU dry run) is slow: toy shapes, the true id in the last column
        logits_cases = [(6, 100, 99, 3)]
        fused_cases = [(19, 50, 20, 49, 2)]
    else:  # T5's vocabulary at a training step's size, and GPT-2's (50257: an odd tail block); the fused
        # head in one slice (N V <= 2^26) and in three (N = 2304)
        logits_cases = [(1024, 32128, 1176, 6136), (33, 50257, 0, 50256)]
        fused_cases = [(512, 32128, 768, 1176, 6136), (77, 1000, 100, 999, 0), (2304, 32128, 768, 31000, 5)]
    gen = torch.Generator(device).manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    def values_and_grads(fn, inputs, upstream):
        inputs = [x.detach().clone().requires_grad_() for x in inputs]
        outputs = fn(*inputs)
        torch.autograd.backward(outputs, upstream)
        return [o.detach() for o in outputs], [x.grad for x in inputs]

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu, TRITON_INTERPRET=1"
    print(
        f"device: {name}; torch {torch.__version__}; triton {_version('triton')}; errors against "
        f"kernels/reference.py on the same inputs; log p tolerance {VALUE_TOL:g} x max(1, max |log p|)\n"
    )
    print("| kernel | dtype | N, V (, d) | max Δ log p | max Δ grad (rel) | grad tolerance | result |")
    print("|---|---|---|---|---|---|---|")
    failures = 0
    for dtype in ["float32", "bfloat16", "float16"]:
        cases = [("logits", shape) for shape in logits_cases] + [("fused", shape) for shape in fused_cases]
        for kind, shape in cases:
            dims = ", ".join(map(str, shape[:3] if kind == "fused" else shape[:2]))
            if kind == "logits":
                n, v, true_id, false_id = shape
                inputs = [(3 * rand(n, v)).to(getattr(torch, dtype))]
                triton = lambda z: kernels.true_false_logprobs(z, true_id, false_id, backend="triton")
                oracle = lambda z: reference.true_false_logprobs(z, true_id, false_id)
            else:
                n, v, d, true_id, false_id = shape
                inputs = [rand(n, d).to(getattr(torch, dtype)), rand(v, d).to(getattr(torch, dtype))]
                scale = d**-0.5  # T5's tied-embedding rescale
                triton = lambda h, w: kernels.fused_true_false_logprobs(
                    h, w, true_id, false_id, scale, backend="triton"
                )
                oracle = lambda h, w: reference.fused_true_false_logprobs(h, w, true_id, false_id, scale)
            upstream = (rand(n), rand(n))  # a random combination a log p_t + b log p_f
            try:
                got, got_grads = values_and_grads(triton, inputs, upstream)
                want, want_grads = values_and_grads(oracle, inputs, upstream)
            except Exception as e:  # a compile error in one dtype should not hide the others
                failures += 1
                print(
                    f"| {kind} | {dtype} | {dims} | - | - | {GRAD_TOL[dtype]:g} | FAIL: {type(e).__name__}: "
                    f"{str(e).splitlines()[0][:100] if str(e) else ''} |"
                )
                continue
            d_value = max((x - y).abs().max().item() for x, y in zip(got, want))
            value_scale = max(1.0, max(y.abs().max().item() for y in want))
            d_grad = max(
                (x.float() - y.float()).abs().max().item() / max(y.float().abs().max().item(), 1e-30)
                for x, y in zip(got_grads, want_grads)
            )
            problems = []
            if not d_value <= VALUE_TOL * value_scale:  # `not <=` also catches NaN
                problems.append("log p")
            if not d_grad <= GRAD_TOL[dtype]:
                problems.append("grad")
            out_dtypes = [x.dtype for x in got] + [g.dtype for g in got_grads]
            if out_dtypes != [torch.float32] * 2 + [x.dtype for x in inputs]:  # float32 out, grads as inputs
                problems.append("dtype")
            failures += bool(problems)
            result = "pass" if not problems else "FAIL: " + ", ".join(problems)
            print(f"| {kind} | {dtype} | {dims} | {d_value:.1e} | {d_grad:.1e} | {GRAD_TOL[dtype]:g} | {result} |")
    print(f"\n{failures} failing row(s)")
    return 1 if failures else 0


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except ImportError:
        return "not installed"


# --- the parts as commands ---------------------------------------------------------------------


@dataclass
class Part:
    name: str
    title: str
    command: list[str]
    # Markdown body from the part's stdout and wall seconds (default: the stdout, which is tables).
    report: Callable[[str, float], str] | None = None
    # Checked before starting: a reason not to run (a missing module), or None.
    preflight: Callable[[], str | None] | None = None
    cleanup: Callable[[], None] | None = None
    env: dict[str, str] = field(default_factory=dict)


def build_parts(args, out: Path) -> dict[str, Part]:
    py, dry = sys.executable, args.cpu_dry_run
    device = "cpu" if dry else "cuda"
    peak = ["--peak-tflops", str(args.peak_tflops)] if args.peak_tflops else []
    parts = {
        "kernels": Part(
            "kernels",
            "Triton kernels against the eager reference, forward and backward",
            [py, __file__, "--kernels-part", device] + (["--tiny"] if dry else []),
            # On the CPU the kernels run in Triton's interpreter, which reads this at @triton.jit time.
            env={"TRITON_INTERPRET": "1"} if dry else {},
        ),
        "kernel_bench": Part(
            "kernel_bench",
            "benchmarks/kernel.py: eager, torch.compile, Triton logits, Triton fused",
            [py, str(BENCH / "kernel.py")] + (["--device", "cpu", "--small", "--reps", "1"] if dry else []),
        ),
        "throughput": Part(
            "throughput",
            "benchmarks/train_throughput.py: a full RE-RAG training step, bf16",
            [py, str(BENCH / "train_throughput.py"), "--device", device, "--precision", "bf16"]
            + (
                [
                    "--sizes",
                    "tiny",
                    "--batch",
                    "1",
                    "--contexts",
                    "2",
                    "--seq-len",
                    "16",
                    "--answer-len",
                    "4",
                    "--steps",
                    "1",
                    "--warmup",
                    "1",
                ]
                if dry
                else ["--sizes", "t5-base", "--batch", "8", "--steps", "10", "--warmup", "3"]
            )
            + peak,
        ),
        "rerank": Part(
            "rerank",
            "benchmarks/rerank.py: RE two-row scoring vs MonoT5-style, bf16",
            [py, str(BENCH / "rerank.py"), "--device", device, "--dtype", "bfloat16"]
            + (
                ["--size", "tiny", "--contexts", "8", "--batch-size", "4", "--length", "16", "--repeats", "1"]
                if dry
                else ["--size", "t5-base", "--contexts", "4096", "--batch-size", "256", "--repeats", "3"]
            ),
        ),
        "erag_cost": Part(
            "erag_cost",
            "eRAG Table 2 (runtime and memory of eRAG against end-to-end evaluation) and its verdict",
            [py, str(BENCH / "erag_cost.py"), "--in-process", "--device", device]
            + (ERAG_COST_TINY.split() + ["--doc-words", "20"] if dry else ERAG_COST_GPU),
        ),
        "demo": demo_part(args, out),
    }
    forced = {p for p in os.environ.get("GPU_CHECK_FAIL", "").split(",") if p}
    for name in forced & set(parts):  # for the tests: the part prints a line, then exits 1 as a crash would
        parts[name].command = [py, "-c", "import sys; print('started'); sys.exit('forced failure: GPU_CHECK_FAIL')"]
        parts[name].preflight = None
    return parts


def demo_part(args, out: Path) -> Part:
    """The demo config with its outputs under OUT/demo, shortened, on the GPU (or CPU, toy world)."""
    dry = args.cpu_dry_run
    max_steps = args.max_steps or (2 if dry else 250)
    demo_out = out / "demo"
    config_path = demo_out / "config.yaml"
    scratch: list[Path] = []  # the temporary folder, once made

    def preflight():
        # Import what `rerag fit` needs, in a child as the part will: a wheel installed without its
        # dependencies fails here with the module it lacks (say, datasets without xxhash).
        check = subprocess.run(
            [sys.executable, "-c", f"import {', '.join(DEMO_MODULES)}, rerag.cli"],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=child_env({}),
            timeout=300,
        )
        if check.returncode != 0:
            error = (check.stderr.strip().splitlines() or ["(no message)"])[-1]
            return (
                f"`rerag fit` cannot be imported: {error}. Bring the wheels ({DEMO_WHEELS}) and install them "
                f"first: python -m pip install --no-index --no-deps .whl/*.whl (docs/gpu_check.md)"
            )
        # The world (25 MB) and the checkpoints go to a temporary folder, not back with the results.
        scratch.append(Path(tempfile.mkdtemp(prefix="gpu_check_demo_")))
        demo_out.mkdir(parents=True, exist_ok=True)
        for stale in ("test_metrics.json", "learning_curve.json"):  # an earlier run's, into the same folder
            (demo_out / stale).unlink(missing_ok=True)
        config_path.write_text(demo_config(args, max_steps, demo_out, scratch[0]))
        return None

    def report(stdout: str, wall: float) -> str:
        return demo_report(demo_out, max_steps, wall, args)

    def cleanup():
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)

    shortened = f", shortened to {max_steps} of {CPU_DEMO['steps']} steps" if max_steps < CPU_DEMO["steps"] else ""
    return Part(
        "demo",
        f"configs/demo.yaml on {'cpu' if dry else 'gpu'}, {args.demo_precision}{shortened}",
        [sys.executable, "-m", "rerag", "fit", "--config", str(config_path)],
        report=report,
        preflight=preflight,
        cleanup=cleanup,
    )


def demo_config(args, max_steps: int, demo_out: Path, scratch: Path) -> str:
    """configs/demo.yaml as YAML text, with the device, precision, steps and every output path set."""
    import yaml  # PyYAML: a dependency of transformers, so on the GPU image too

    config = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    trainer, data = config["trainer"], config["data"]["init_args"]
    trainer.update(
        accelerator="cpu" if args.cpu_dry_run else "gpu",
        precision=args.demo_precision,
        max_steps=max_steps,
        enable_progress_bar=False,  # carriage-return redraws only clutter a log file
        default_root_dir=str(demo_out),
    )
    trainer["logger"]["init_args"]["save_dir"] = str(demo_out)
    paths = {
        "LaterOnTiesCheckpoint": ("dirpath", scratch / "checkpoints"),
        "MetricsWriter": ("path", demo_out / "test_metrics.json"),
        "LearningCurve": ("path", demo_out / "learning_curve"),
    }
    callbacks = []
    for callback in trainer["callbacks"]:
        kind = callback["class_path"].rsplit(".", 1)[-1]
        if kind == "LearningCurve" and not _has_module("matplotlib"):
            continue  # it draws a PNG at every validation; the CSV log keeps the same points
        if kind in paths:
            key, value = paths[kind]
            callback["init_args"][key] = str(value)
        if kind == "MetricsWriter":  # its per-question results too, not into the working folder's outputs/
            callback["init_args"]["results"] = str(demo_out / "test_results.jsonl")
        callbacks.append(callback)
    trainer["callbacks"] = callbacks
    data["data_dir"] = str(scratch / "data")
    if args.cpu_dry_run:  # a toy world: 20 training people (80 questions), 4 dev and 4 test people
        data["world"].update(n_train_people=20, n_dev_people=4, n_test_people=4)
    return yaml.safe_dump(config, sort_keys=False)


def demo_report(demo_out: Path, max_steps: int, wall: float, args) -> str:
    metrics = json.loads((demo_out / "test_metrics.json").read_text())
    dev = _dev_recall(demo_out)  # (step, value) of the last validation, or None
    cpu_dev = CPU_DEMO_DEV_RECALL.get(dev[0]) if dev else None
    where = f"{'cpu (dry run, toy world)' if args.cpu_dry_run else 'gpu'}, {args.demo_precision}"
    lines = [
        "Wall time of `rerag fit` (world, sanity validation, training, validation, test). Test split; dev RE "
        "Recall@1 at this run's last validation, the CPU run's at the same step beside it.",
        "",
        "| run | steps | wall | test RE Recall@1 | test BM25 Recall@1 | test RE-RAG EM | test retriever-order EM "
        "| dev RE Recall@1 (step) |",
        "|---|---|---|---|---|---|---|---|",
        f"| CPU, 2 cores, 32-true (README) | {CPU_DEMO['steps']} | {CPU_DEMO['wall']} | "
        + " | ".join(
            f"{CPU_DEMO[k]:.3f}"
            for k in ("test/re_recall@1", "test/retriever_recall@1", "test/em", "test/em_retriever_order")
        )
        + f" | {f'{cpu_dev:.3f} ({dev[0]})' if cpu_dev is not None else '-'} |",
        f"| this run: {where}"
        + (f", **shortened to {max_steps} of {CPU_DEMO['steps']} steps**" if max_steps < CPU_DEMO["steps"] else "")
        + f" | {metrics.get('global_step', '?')} | {_minutes(wall)} | "
        + " | ".join(
            f"{metrics[k]:.3f}" if k in metrics else "-"
            for k in ("test/re_recall@1", "test/retriever_recall@1", "test/em", "test/em_retriever_order")
        )
        + f" | {f'{dev[1]:.3f} ({dev[0]})' if dev else '-'} |",
        "",
        f"test_metrics.json: `{json.dumps(metrics)}`",
    ]
    return "\n".join(lines)


def _dev_recall(demo_out: Path) -> tuple[int, float] | None:
    """(step, dev RE Recall@1) of the run's last validation, or None."""
    curve = demo_out / "learning_curve.json"  # LearningCurve's points, by global step
    if curve.is_file():
        points = [p for p in json.loads(curve.read_text()) if "val/re_recall@1" in p]
        return (int(points[-1]["step"]), points[-1]["val/re_recall@1"]) if points else None
    last = None  # without matplotlib there is no LearningCurve: read the CSV log
    logs = sorted(demo_out.glob("csv/version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    for path in logs[-1:]:  # this run's: CSVLogger numbers each run into the same folder
        with open(path) as f:
            for row in csv.DictReader(f):
                if row.get("val/re_recall@1"):
                    # Lightning logs a validation inside an epoch at the step count before the
                    # optimizer step that ended it: the validation after step 250 is row "249".
                    last = (int(row["step"]) + 1, float(row["val/re_recall@1"]))
    return last


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s" if seconds >= 60 else f"{seconds:.1f} s"


# --- running a part ------------------------------------------------------------------------------


def child_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    # bm25s imports JAX where it is installed, and JAX takes 75% of the GPU on first use unless told
    # not to: a t5-base run went out of memory with 60 GiB held outside PyTorch (BENCHMARKS.md).
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    # The repository's packages, whether or not they are installed (the GPU machine gets a bare copy).
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"  # a killed part still leaves what it printed
    for key, value in {
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }.items():
        env.setdefault(key, value)  # no network on the GPU machines
    env.update(extra)
    return env


def run_command(
    command: list[str], env: dict[str, str], timeout: float, stdout_path: Path, stderr_path: Path
) -> tuple[int | None, float]:
    """(exit code or None when stopped at the timeout, wall seconds). Output goes to the files as it
    comes, so a stopped part keeps it. The part runs in its own process group, which a timeout ends
    whole (torch.compile and DataLoader workers start processes of their own)."""
    start = time.monotonic()
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, cwd=REPO, env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    return code, time.monotonic() - start


def run_part(index: int, part: Part, out: Path, timeout: float) -> tuple[str, float, Path]:
    """Run one part and write `<index>_<name>.md`; (status, wall seconds, that file)."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = logs / f"{part.name}.stdout", logs / f"{part.name}.stderr"
    md_path = out / f"{index}_{part.name}.md"
    command_line = " ".join(part.command)
    try:
        reason = part.preflight() if part.preflight else None
    except Exception as e:  # preparing one part must not end the run either
        reason = f"its preparation failed: {type(e).__name__}: {e}"
    wall, body = 0.0, ""
    if reason:
        status = "not run"
        body = f"Not run: {reason}"
    elif timeout <= 0:
        status = "not run"
        body = "Not run: no time left under --total-timeout."
    else:
        code, wall = run_command(part.command, child_env(part.env), timeout, stdout_path, stderr_path)
        stdout = stdout_path.read_text(errors="replace")
        stderr = stderr_path.read_text(errors="replace")
        if code == 0:
            status = "ok"
            try:
                body = part.report(stdout, wall) if part.report else stdout.strip()
            except Exception as e:  # the part ran but left no result to read (a missing metrics file)
                status = "failed"
                body = f"The part ended but its result could not be read: {type(e).__name__}: {e}\n\n" + _tail(stderr)
        else:
            status = f"timed out after {timeout:.0f} s" if code is None else f"failed (exit code {code})"
            if "OutOfMemoryError" in stderr or "out of memory" in stderr:
                status += ", out of memory"
            body = (
                f"**{status}.** What it printed (its tables so far):\n\n{_tail(stdout, 80, fence=False)}\n\n"
                f"Last lines of its stderr:\n\n{_tail(stderr)}"
            )
    if part.cleanup:
        part.cleanup()
    md_path.write_text(
        f"## {index}. {part.name}: {part.title}\n\n"
        f"`{command_line}` (working folder: the repository)\n\n"
        f"Status: {status}; wall {wall:.1f} s.\n\n{body}\n"
    )
    return status, wall, md_path


def _tail(text: str, lines: int = 40, fence: bool = True) -> str:
    tail = "\n".join(text.strip().splitlines()[-lines:]) or "(nothing)"
    return f"```\n{tail}\n```" if fence else tail


def device_line(dry: bool) -> str:
    """The GPU's name without starting CUDA in this process (which would hold memory all run long)."""
    if dry:
        return "CPU dry run (toy sizes; timings mean nothing)"
    try:
        query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip() or "unknown GPU"
    except (OSError, subprocess.SubprocessError):
        return "unknown (no nvidia-smi)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default=",".join(PARTS), help="comma-separated, from: " + ", ".join(PARTS))
    p.add_argument("--out", default="outputs/gpu_check", help="output folder (default: %(default)s)")
    p.add_argument("--cpu-dry-run", action="store_true", help="the same steps at toy sizes on the CPU")
    p.add_argument("--part-timeout", type=float, default=300, help="seconds per part (default: %(default)s)")
    p.add_argument(
        "--total-timeout",
        type=float,
        default=540,
        help="seconds for the whole run; parts get what is left (default: %(default)s)",
    )
    p.add_argument("--max-steps", type=int, help="demo training steps (default: 250 on GPU, 2 in the dry run)")
    p.add_argument("--demo-precision", default="bf16-mixed", help="demo trainer.precision (default: %(default)s)")
    p.add_argument("--peak-tflops", type=float, help="peak for the throughput part's MFU (default: looked up)")
    p.add_argument("--kernels-part", metavar="DEVICE", help=argparse.SUPPRESS)  # part 1's own process
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.kernels_part:
        return kernels_part(args.kernels_part, args.tiny)

    chosen = [name.strip() for name in args.parts.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in PARTS]
    if unknown:
        p.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    parts = build_parts(args, out)
    device = device_line(args.cpu_dry_run)
    print(f"gpu_check: {device}; parts {', '.join(chosen)}; writing to {out}", flush=True)
    start, rows = time.monotonic(), []
    for index, name in enumerate((n for n in PARTS if n in chosen), start=1):
        left = args.total_timeout - (time.monotonic() - start)
        print(f"\n[gpu_check] {name}: started ({left:.0f} s left)", flush=True)
        status, wall, md_path = run_part(index, parts[name], out, min(args.part_timeout, left))
        print(md_path.read_text(), flush=True)
        rows.append(f"| {index}. {name} | {status} | {wall:.1f} | {md_path.name} |")
        (out / "summary.md").write_text(
            f"# gpu_check\n\nDevice: {device}\n\n| part | status | wall s | file |\n|---|---|---|---|\n"
            + "\n".join(rows)
            + f"\n\nTotal wall: {time.monotonic() - start:.1f} s\n"
        )
    print((out / "summary.md").read_text(), flush=True)
    return 0 if all("| ok |" in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
