"""One fit config over several seeds, each tested on every test file named: the spread one run hides.

The frozen-teacher config's seeds 0-2 put the gold passage first for 0.72, 0.62 and 0.59 of the same
100 held-out questions (BENCHMARKS.md): one seed cannot say whether a setting reaches BM25. For each
seed this runs `rerag fit --config <a copy whose outputs go to OUT/seed<S>> --seed_everything S`
(test included when the config has `test_after_fit`), then `rerag test` of the checkpoint the
config's ModelCheckpoint keeps on each `--test-files` file, and ends with one table: per file and
seed, the RE's gold Recall@1 and RE-RAG's F1 against the retriever's order read by the same
generator, with paired-bootstrap 95% intervals (`rerag.infer.compare`), and their mean over seeds.

    python benchmarks/seed_sweep.py --config configs/squad_smollm2_base.yaml configs/squad_smollm2_teacher.yaml --seeds 3 4 5 --parallel 3 \\
        --test-files data/squad_sentences/test.jsonl --out outputs/seed_sweep -- --trainer.accelerator gpu

Arguments after `--` go to every `rerag fit` and `rerag test`. The seeds share the config's teacher
cache (`model.teacher.cache_dir`, keyed by what decides it): one that runs alone first builds it for
the rest, while seeds started together each build a missing one. `--deadline` bounds the whole sweep in
seconds: a step still running then is stopped, and the table holds what finished; `OUT/status.json`
says where each seed stands while it runs (for a machine reached by short calls, start the sweep
detached and read that file). `--table-only` rebuilds the table from OUT.

`rerag reproduce` moves a run's outputs into a folder in its own process (`rerag.reproduce.workspace`);
a sweep runs each seed as `rerag` processes instead, so that seeds run side by side and a deadline
can stop them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from erag.lm import resolve
from rerag.infer.compare import compare

FIGURES = ("gold R@1", "F1")


def seed_config(text: str, root: str, new_root: str) -> str:
    """The config's text with its output folder (`trainer.default_root_dir`, under which the shipped
    configs keep checkpoints, logs and metrics) moved to `new_root`; a longer path that only begins
    with `root` (outputs/squad_smollm2_teacher beside outputs/squad_smollm2) stays as it is."""
    return re.sub(re.escape(root) + r"(?=/|\s|$)", new_root, text, flags=re.MULTILINE)


def merged_config(configs: list[str]) -> str:
    """One config's text from a base and its overlays (`rerag fit --print_config` of them in order);
    a single file's text as it is."""
    if len(configs) == 1:
        return Path(resolve(configs[0])).read_text()
    argv = [sys.executable, "-m", "rerag", "fit", *(a for c in configs for a in ("--config", resolve(c)))]
    return subprocess.run([*argv, "--print_config"], check=True, capture_output=True, text=True).stdout


def callback_args(config: dict, kind: str) -> dict:
    """The init_args of the config's callback whose class name ends with `kind`."""
    for callback in config["trainer"].get("callbacks") or []:
        if callback["class_path"].endswith(kind):
            return callback["init_args"]
    raise ValueError(f"the config has no {kind} callback: the sweep reads its checkpoint and results from them")


def kept_checkpoint(config: dict) -> Path:
    """The checkpoint the config's checkpoint callback (a ModelCheckpoint) keeps for testing: dirpath/filename.ckpt."""
    args = callback_args(config, "Checkpoint")
    return Path(args["dirpath"]) / f"{args.get('filename') or 'last'}.ckpt"


def results_name(test_file: str) -> str:
    """Where a seed keeps its results on `test_file`: OUT/seed<S>/<this> (data/squad/test.jsonl ->
    data_squad_test.jsonl)."""
    return str(Path(test_file).with_suffix("")).strip("/").replace("/", "_") + ".jsonl"


def written_results(config: dict) -> Path:
    """The per-question results file the config's MetricsWriter writes at the end of a test."""
    results = callback_args(config, "MetricsWriter").get("results")
    if not results:
        raise ValueError("the config's MetricsWriter has no `results`: a test would leave no per-question file")
    return Path(results)


class Sweep:
    """The seeds' runs of one config: each seed's steps in order, the seeds on threads, one deadline."""

    def __init__(self, config: list[str], out: Path, test_files: list[str], extra: list[str], deadline: float):
        self.out, self.test_files, self.extra, self.deadline = out, test_files, extra, deadline
        self.text = merged_config(config)
        parsed = yaml.safe_load(self.text)
        self.root = parsed["trainer"]["default_root_dir"]
        self.fit_test_file = parsed["data"]["init_args"].get("test_file")
        self.status: dict[str, str] = {}
        self.lock = threading.Lock()

    def report(self, seed: int, state: str) -> None:
        with self.lock:
            self.status[f"seed{seed}"] = state
            (self.out / "status.json").write_text(json.dumps(self.status, indent=1) + "\n")

    def step(self, seed: int, name: str, argv: list[str]) -> bool:
        """Run one rerag command for `seed`, its log in OUT/seed<S>/<name>.log; False if it failed
        or ran out of the sweep's time."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.report(seed, f"{name}: not started, out of time")
            return False
        self.report(seed, f"{name}: running")
        with open(self.out / f"seed{seed}" / f"{name}.log", "w") as log:
            try:
                timeout = None if left == float("inf") else left
                code = subprocess.run(
                    argv + self.extra, stdout=log, stderr=subprocess.STDOUT, timeout=timeout
                ).returncode
            except subprocess.TimeoutExpired:
                self.report(seed, f"{name}: stopped at the deadline")
                return False
        self.report(seed, f"{name}: {'done' if code == 0 else f'failed (exit {code})'}")
        return code == 0

    def run_seed(self, seed: int) -> None:
        folder = self.out / f"seed{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        text = seed_config(self.text, self.root, str(folder))
        (folder / "config.yaml").write_text(text)
        config = yaml.safe_load(text)
        results = written_results(config)
        results.unlink(missing_ok=True)  # a copied file is always this sweep's
        rerag = [sys.executable, "-m", "rerag"]
        base = ["--config", str(folder / "config.yaml"), "--seed_everything", str(seed)]
        if not self.step(seed, "fit", [*rerag, "fit", *base]):
            return
        if config.get("test_after_fit") and self.fit_test_file and results.exists():
            shutil.copy(results, folder / results_name(self.fit_test_file))
        test = [*rerag, "test", *base, "--ckpt_path", str(kept_checkpoint(config))]
        for n, path in enumerate(self.test_files, 1):
            results.unlink(missing_ok=True)  # what is copied is this test's
            if self.step(seed, f"test{n}", [*test, "--data.init_args.test_file", path]) and results.exists():
                shutil.copy(results, folder / results_name(path))
        self.report(seed, "finished")


def seed_rows(out: Path, seeds: list[int], test_files: list[str]) -> list[dict]:
    """Per test file and seed with results: each FIGURES of the RE's order (RE-RAG's answer), of the
    retriever's order read by the same generator, and their paired difference with its interval."""
    rows = []
    for test_file in test_files:
        for seed in seeds:
            path = out / f"seed{seed}" / results_name(test_file)
            if not path.exists():
                continue
            run = f"seed{seed}"
            report = compare({run: path}, retriever=run, ks=[1])
            ours, theirs = report["systems"][run], report["systems"]["retriever"]
            diff = report["differences"][f"{run} - retriever"]
            row = {"file": test_file, "seed": seed, "questions": report["questions"]}
            for figure in FIGURES:
                if figure in ours:
                    row[figure] = (
                        ours[figure]["value"],
                        theirs[figure]["value"],
                        diff[figure]["value"],
                        diff[figure]["ci"],
                    )
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    """The rows as Markdown, each file's seeds followed by their mean."""
    head = "| file | seed | questions | " + " | ".join(f"{f} | retriever | difference [95%]" for f in FIGURES) + " |"
    lines = [head, "|---" * (3 + 3 * len(FIGURES)) + "|"]
    for name in dict.fromkeys(r["file"] for r in rows):
        mine = [r for r in rows if r["file"] == name]
        for r in mine:
            cells = [
                "{:.3f} | {:.3f} | {:+.3f} [{:+.3f}, {:+.3f}]".format(*r[f][:3], *r[f][3]) if f in r else " | | "
                for f in FIGURES
            ]
            lines.append(f"| {name} | {r['seed']} | {r['questions']} | " + " | ".join(cells) + " |")
        means = []
        for f in FIGURES:
            values = [r[f] for r in mine if f in r]
            ours, theirs, d = (sum(v[i] for v in values) / max(len(values), 1) for i in range(3))
            means.append(f"{ours:.3f} | {theirs:.3f} | {d:+.3f}" if values else " | | ")
        lines.append(f"| {name} | mean of {len(mine)} | | " + " | ".join(means) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--config",
        nargs="+",
        required=True,
        help="fit config files, overlays last (rerag:configs/... names a shipped one)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True, help="OUT/seed<S>/ per seed, OUT/sweep.md the table")
    parser.add_argument("--test-files", nargs="*", default=[], help="tested after fit, beside the config's test file")
    parser.add_argument("--parallel", type=int, default=1, help="seeds run at once (1 on a CPU; several on a GPU)")
    parser.add_argument("--deadline", type=float, default=float("inf"), help="seconds for the whole sweep")
    parser.add_argument("--table-only", action="store_true", help="only rebuild the table from OUT")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)

    args.out.mkdir(parents=True, exist_ok=True)
    sweep = Sweep(args.config, args.out, args.test_files, extra, time.monotonic() + args.deadline)
    if not args.table_only:
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            list(pool.map(sweep.run_seed, args.seeds))
    files = ([sweep.fit_test_file] if sweep.fit_test_file else []) + args.test_files
    text = table(seed_rows(args.out, args.seeds, list(dict.fromkeys(files))))
    (args.out / "sweep.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
