"""Leave-one-article-out folds of a real-LM config: does what it learns on three SQuAD articles carry
to an article it never saw? One fold per call, its results committed; `table` builds one table from
every committed fold.

    python benchmarks/folds.py run --input squad2_dev_5articles.json --test-article Normans
    python benchmarks/folds.py table

A fold (test article T; dev: Computational complexity theory, every answerable question; train: the
other three articles, their contexts retrieved from their own passages only) runs these steps, each
skipped when its output is there already (a stopped fold resumes at the step it was in, not inside it):

1. data: `rerag make-squad --test_articles [T] --dev_articles [...]` -> data/fold_<name>/, and the
   second builder's test file of T (benchmarks/sentence_passages.py) -> data/fold_<name>_sentences/;
2. fit: the config (a base and its overlay, as shipped) with its data files moved to data/fold_<name>/
   and its outputs, teacher cache included, to outputs/fold_<name>/, cold; its test of the final weights;
3. other_builder: `rerag test` of the same weights on the second builder's test file;
4. zero_shot: `rerag test` of the config without training: the base with its LoRA adapters at their
   initialization (PEFT's B = 0, the base itself), the same prompts, top-k and passages;
5. upr, dense, re_cost: `rerag score-rival` on the test file's passages as the test reads them (UPR
   under the config's base LM; all-MiniLM-L6-v2's cosine; the trained RE, exported, timed the same way:
   each one's milliseconds per passage);
6. collect: the fold's metrics, per-question results, rivals' rows and every step's wall time, into
   benchmarks/results/folds/<name>/ (committed: a fit cannot resume across machines, its checkpoint
   is not kept).

`table` reads the committed folds and compares each fold's systems on its questions with paired
bootstrap intervals (`rerag.infer.compare`): gold and has-answer Recall@1 of the trained RE, the
zero-shot RE, UPR, the dense encoder and BM25 (the file's order); EM and F1 of RE-RAG, of the trained
generator reading BM25's order and of the zero-shot system; the trained RE minus BM25 and minus UPR.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rerag.infer.compare import compare

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "folds"
DEV_ARTICLE = "Computational_complexity_theory"
#: The committed files of a fold, by the step that writes each.
KEPT = {
    "fit": ("test_metrics.json", "test_results.jsonl"),
    "other_builder": ("other_builder/test_metrics.json", "other_builder/test_results.jsonl"),
    "zero_shot": ("zero_shot/test_metrics.json", "zero_shot/test_results.jsonl"),
    "upr": ("upr.jsonl", "upr.summary.json"),
    "dense": ("dense.jsonl", "dense.summary.json"),
    "re_cost": ("re.summary.json",),
}


#: A fold's steps, in order (module docstring).
STEPS = ("data", "fit", "other_builder", "zero_shot", "upr", "dense", "re_cost")


def fold_name(title: str) -> str:
    """The fold's folder name: the title's first word, lowercased (Sky_(United_Kingdom) -> sky)."""
    return title.split("_")[0].strip("()").lower()


def fold_configs(base: str, overlay: str, data: str, outputs: str) -> tuple[str, str]:
    """The base's and the overlay's text with the data folder (`data/squad/`) and the outputs folder
    (the overlay's `trainer.default_root_dir`) moved to the fold's."""
    root = yaml.safe_load(overlay)["trainer"]["default_root_dir"]
    return base.replace("data/squad/", f"{data}/"), overlay.replace(root, outputs)


class Fold:
    """The steps of one fold (module docstring), run as `rerag` processes."""

    def __init__(self, args: argparse.Namespace):
        self.title, self.name = args.test_article, args.name or fold_name(args.test_article)
        self.input, self.extra, self.steps = args.input, args.extra, args.steps
        self.data, self.sentences = Path(f"data/fold_{self.name}"), Path(f"data/fold_{self.name}_sentences")
        self.out, self.kept = Path(f"outputs/fold_{self.name}"), RESULTS / self.name
        self.out.mkdir(parents=True, exist_ok=True)
        base, overlay = (Path(c).read_text() for c in args.config)
        base_text, overlay_text = fold_configs(base, overlay, str(self.data), str(self.out))
        self.configs = [self.out / "base.yaml", self.out / "overlay.yaml"]
        self.configs[0].write_text(base_text)
        self.configs[1].write_text(overlay_text)
        self.times_file = self.out / "times.json"
        self.times = json.loads(self.times_file.read_text()) if self.times_file.exists() else {}
        self.base_lm = yaml.safe_load(base_text)["model"]["estimator"]["name_or_path"]
        base_config = yaml.safe_load(base_text)
        self.contexts = base_config["data"]["init_args"]["n_eval_contexts"]
        limit = base_config["trainer"].get("limit_test_batches")  # the test reads its first limit x batch questions
        self.questions = limit * base_config["data"]["init_args"]["eval_batch_size"] if isinstance(limit, int) else None

    def rerag(self, step: str, *args: str, out: Path | None = None) -> None:
        """Run `rerag ARGS` unless `out` exists or `--steps` leaves the step out, its log in
        outputs/fold_<name>/<step>.log, its wall time kept."""
        if out is not None and out.exists() or step not in self.steps:
            print(f"{step}: skipped ({out} is there)" if step in self.steps else f"{step}: not asked for", flush=True)
            return
        start = time.monotonic()
        with open(self.out / f"{step}.log", "w") as log:
            subprocess.run([sys.executable, "-m", "rerag", *args], stdout=log, stderr=subprocess.STDOUT, check=True)
        self.times[step] = round(time.monotonic() - start, 1)
        self.times_file.write_text(json.dumps(self.times, indent=1) + "\n")
        print(f"{step}: {self.times[step]:.0f} s", flush=True)

    def config(self, *more: str) -> list[str]:
        return [a for c in self.configs for a in ("--config", str(c))] + list(more) + self.extra

    def moved(self, folder: str) -> list[str]:
        """A test's overrides that keep its metrics and results in outputs/fold_<name>/<folder>/."""
        writer = f"{self.out}/{folder}"
        config = yaml.safe_load(self.configs[1].read_text())
        callbacks = config["trainer"]["callbacks"]
        for callback in callbacks:
            if callback["class_path"].endswith("MetricsWriter"):
                callback["init_args"] |= {
                    "path": f"{writer}/test_metrics.json",
                    "results": f"{writer}/test_results.jsonl",
                }
        return ["--trainer.callbacks", json.dumps(callbacks), "--trainer.default_root_dir", writer]

    def run(self) -> None:
        if "data" in self.steps and not (self.data / "test.jsonl").exists():
            titles = [f"--test_articles=[{self.title}]", f"--dev_articles=[{DEV_ARTICLE}]"]
            self.rerag("data", "make-squad", "--input", self.input, "--out", str(self.data), *titles)
        if "data" in self.steps and not (self.sentences / "test.jsonl").exists():
            script = ROOT / "benchmarks" / "sentence_passages.py"
            argv = ["--input", self.input, "--articles", self.title, "--out", str(self.sentences)]
            subprocess.run([sys.executable, str(script), *argv], check=True)
        checkpoint = self.out / "checkpoints" / "final.ckpt"
        teacher = ["--model.teacher.cache_dir", f"{self.out}/teacher_cache"]
        self.rerag("fit", "fit", *self.config(*teacher), out=self.out / "test_metrics.json")
        test = self.sentences / "test.jsonl"
        other = ["--ckpt_path", str(checkpoint), "--data.init_args.test_file", str(test)]
        self.rerag(
            "other_builder",
            "test",
            *self.config(*other, *self.moved("other_builder")),
            out=self.out / "other_builder" / "test_metrics.json",
        )
        self.rerag(
            "zero_shot",
            "test",
            *self.config(*self.moved("zero_shot")),
            out=self.out / "zero_shot" / "test_metrics.json",
        )
        rival = ["score-rival", "--input", str(self.data / "test.jsonl"), "--contexts", str(self.contexts)]
        rival += ["--questions", str(self.questions)] if self.questions else []
        self.rerag(
            "upr",
            *rival,
            "--rival",
            "upr",
            "--model",
            self.base_lm,
            "--out",
            str(self.out / "upr.jsonl"),
            out=self.out / "upr.jsonl",
        )
        self.rerag(
            "dense", *rival, "--rival", "dense", "--out", str(self.out / "dense.jsonl"), out=self.out / "dense.jsonl"
        )
        export = self.out / "export"
        self.rerag("re_cost", "export", "--checkpoint", str(checkpoint), "--out", str(export), out=export)
        estimator = ["--rival", "re", "--estimator", str(export / "estimator")]
        self.rerag("re_cost", *rival, *estimator, "--out", str(self.out / "re.jsonl"), out=self.out / "re.jsonl")
        self.collect()

    def collect(self) -> None:
        """Copy the fold's kept files that its steps have written, and their wall times, into
        benchmarks/results/folds/<name>/."""
        for files in KEPT.values():
            for name in files:
                if (self.out / name).exists():
                    (self.kept / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(self.out / name, self.kept / name)
        fold = {"test_article": self.title, "dev_article": DEV_ARTICLE, "seconds": self.times}
        (self.kept / "fold.json").write_text(json.dumps(fold, indent=1) + "\n")


def fold_report(folder: Path) -> dict:
    """One committed fold's systems and the trained RE's differences (`rerag.infer.compare`)."""
    runs = {
        "zero-shot": folder / "zero_shot" / "test_results.jsonl",
        "UPR": folder / "upr.jsonl",
        "dense": folder / "dense.jsonl",
        "RE-RAG": folder / "test_results.jsonl",
    }
    report = compare({k: v for k, v in runs.items() if v.exists()}, retriever="RE-RAG", against="RE-RAG", ks=[1])
    report["fold"] = json.loads((folder / "fold.json").read_text())
    summaries = {s: folder / f"{s}.summary.json" for s in ("re", "upr", "dense")}
    report["cost"] = {s: json.loads(f.read_text())["ms_per_passage"] for s, f in summaries.items() if f.exists()}
    return report


def cell(report: dict, system: str, figure: str) -> str:
    value = report["systems"].get(system, {}).get(figure)
    return "" if value is None else f"{value['value']:.3f}"


def difference(report: dict, other: str, figure: str) -> str:
    d = report["differences"].get(f"RE-RAG - {other}", {}).get(figure)
    return "" if d is None else "{:+.3f} [{:+.3f}, {:+.3f}]".format(d["value"], *d["ci"])


def table(reports: list[dict]) -> str:
    """The folds as one Markdown table (BM25: the file's order, its answers the trained generator's)."""
    systems = ("RE-RAG", "zero-shot", "UPR", "dense", "retriever")
    head = ["fold (test article, questions)"]
    head += [f"gold R@1 {s}" for s in systems] + ["RE - BM25 gold R@1", "RE - UPR gold R@1"]
    head += ["has_answer R@1 RE-RAG", "has_answer R@1 BM25"]
    head += ["EM / F1 RE-RAG", "EM / F1 BM25's order", "EM / F1 zero-shot", "RE-RAG - BM25's order F1", "fit s"]
    head += ["ms per passage: RE / UPR / dense"]
    lines = ["| " + " | ".join(head).replace("retriever", "BM25") + " |", "|---" * len(head) + "|"]
    for r in reports:
        fold = r["fold"]
        row = [f"{fold['test_article']} ({r['questions']})"]
        row += [cell(r, s, "gold R@1") for s in systems]
        row += [difference(r, "retriever", "gold R@1"), difference(r, "UPR", "gold R@1")]
        row += [cell(r, "RE-RAG", "has_answer R@1"), cell(r, "retriever", "has_answer R@1")]
        row += [f"{cell(r, s, 'EM')} / {cell(r, s, 'F1')}" for s in ("RE-RAG", "retriever", "zero-shot")]
        row += [difference(r, "retriever", "F1"), str(fold["seconds"].get("fit", ""))]
        row += [" / ".join(str(r["cost"].get(s, "")) for s in ("re", "upr", "dense"))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one fold and commit its results")
    run.add_argument("--input", required=True, help="the SQuAD-format JSON of the five articles")
    run.add_argument("--test-article", required=True, help="the test article's title as the file spells it")
    run.add_argument("--name", help="the fold's folder name (default: the title's first word, lowercased)")
    run.add_argument(
        "--config",
        nargs=2,
        default=["configs/squad_smollm2_base.yaml", "configs/squad_smollm2.yaml"],
        help="the base and its overlay",
    )
    run.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="the steps to run (default: all)")
    sub.add_parser("table", help="the table of the committed folds")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.extra = extra  # after `--`: given to every `rerag fit` and `rerag test`
    if args.command == "run":
        Fold(args).run()
    folders = sorted(p.parent for p in RESULTS.glob("*/fold.json"))
    print(table([fold_report(folder) for folder in folders]))


if __name__ == "__main__":
    main()
