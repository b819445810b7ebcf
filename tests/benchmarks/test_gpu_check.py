"""benchmarks/gpu_check.py: its CPU dry run writes every part's table, and a part that fails or
runs out of time writes why without stopping the others. Offline: toy models and a toy world."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
PARTS = ["kernels", "kernel_bench", "throughput", "rerank", "erag_cost", "demo"]
# A Markdown table row holding a number (an integer or a decimal, e.g. "| 2 |" or "| 0.062 |").
TABLE_ROW_WITH_NUMBER = re.compile(r"^\|.*\|\s*-?\d+(\.\d+)?(e[-+]\d+)?%?\s*\|", re.MULTILINE)


def run_gpu_check(out: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-dry-run", "--out", str(out), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def part_file(out: Path, index: int, name: str) -> str:
    path = out / f"{index}_{name}.md"
    assert path.is_file(), f"{path} missing; folder holds {sorted(p.name for p in out.iterdir())}"
    return path.read_text()


@pytest.mark.slow
def test_dry_run_writes_every_part(tmp_path):
    result = run_gpu_check(tmp_path)
    # Without triton (a CPU install without the dev extra) the kernels part fails, and says why.
    has_triton = importlib.util.find_spec("triton") is not None
    assert result.returncode == (0 if has_triton else 1), result.stdout[-3000:] + result.stderr[-3000:]
    for index, name in enumerate(PARTS, start=1):
        text = part_file(tmp_path, index, name)
        assert "Status: ok" in text or (name == "kernels" and not has_triton), text
        if name == "erag_cost":  # its cells carry units (s, MiB, x), and its verdict follows the table
            assert "memory document-level" in text and "Reproduced: " in text, text
        else:
            assert "|---|" in text and TABLE_ROW_WITH_NUMBER.search(text), text
        assert text.split("\n", 1)[0] in result.stdout  # printed as well as written
    assert ("| pass |" if has_triton else "ImportError") in part_file(tmp_path, 1, "kernels")
    assert "MFU" in part_file(tmp_path, 3, "throughput")
    # on the CPU the runtime is not judged: the verdict is the memory parts'
    assert "runtime on cpu: E2E FiD time / eRAG time" in part_file(tmp_path, 5, "erag_cost")
    demo = part_file(tmp_path, 6, "demo")
    assert "shortened to 2 of 1200 steps" in demo and "9 min 19 s" in demo  # against the CPU run of the config
    assert (tmp_path / "demo" / "test_metrics.json").is_file()
    summary = (tmp_path / "summary.md").read_text()
    assert summary.count("| ok |") == len(PARTS) - (not has_triton)


def test_failed_part_writes_its_error_and_the_next_part_runs(tmp_path):
    result = run_gpu_check(tmp_path, "--parts", "kernels,rerank", env_extra={"GPU_CHECK_FAIL": "kernels"})
    assert result.returncode == 1  # not every part passed
    failed = part_file(tmp_path, 1, "kernels")
    assert "failed (exit code 1)" in failed
    assert "started" in failed and "forced failure: GPU_CHECK_FAIL" in failed  # its stdout and stderr tail
    rerank = part_file(tmp_path, 2, "rerank")  # numbered by position in the run, after the failure
    assert "Status: ok" in rerank and TABLE_ROW_WITH_NUMBER.search(rerank)
    summary = (tmp_path / "summary.md").read_text()
    assert "| 1. kernels | failed (exit code 1) |" in summary and "| 2. rerank | ok |" in summary


def test_part_past_its_timeout_is_stopped_with_its_output_kept(tmp_path, monkeypatch):
    # Loaded from its file, not through sys.path: benchmarks/ holds eor.py and erag.py.
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_check", gpu_check)  # dataclasses look their module up there
    spec.loader.exec_module(gpu_check)
    sleeper = [sys.executable, "-c", "import time; print('| step | 1 |', flush=True); time.sleep(60)"]
    part = gpu_check.Part("sleeper", "a part that hangs", sleeper)
    status, wall, md_path = gpu_check.run_part(7, part, tmp_path, timeout=3)
    assert status == "timed out after 3 s" and wall < 30
    text = md_path.read_text()
    assert md_path.name == "7_sleeper.md" and "| step | 1 |" in text


def test_unknown_part_is_an_error(tmp_path):
    result = run_gpu_check(tmp_path, "--parts", "kernels,nope")
    assert result.returncode == 2 and "unknown part(s) nope" in result.stderr


def test_gpu_parts_import_without_the_demo_dependencies():
    # The GPU machines lack datasets, jsonargparse and bm25s: the models and losses must not load them.
    import os

    code = (
        "import sys, kernels, rerag.losses, rerag.models.estimator, rerag.models.generator\n"
        "import eor, rerag.demo.world\n"  # bm25s (and with it JAX) loads where BM25 runs
        "print(sorted(m for m in ('datasets', 'jsonargparse', 'bm25s') if m in sys.modules))"
    )
    repo = str(SCRIPT.parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=repo)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"
