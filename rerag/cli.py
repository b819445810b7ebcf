"""The `rerag` command: LightningCLI's fit, validate, test and predict, plus the package's
own subcommands (`COMMANDS`: make-demo-data, make-tokenizer, pretrain, export, rerank, predict-file,
unanswerable-report, eor, erag)."""
from __future__ import annotations

import argparse
import sys

from lightning.pytorch.cli import LightningCLI

from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule


class RERAGCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # The data side tokenizes with the models' own tokenizers and input settings.
        for name in ("re_tokenizer", "generator_tokenizer", "re_template", "re_max_length", "generator_template",
                     "generator_max_length", "max_answer_length"):
            parser.link_arguments(f"model.{name}", f"data.{name}")
        parser.add_argument("--test_after_fit", type=bool, default=False,
                            help="after fit, run test on the best checkpoint (or the last weights)")

    def after_fit(self) -> None:
        if not self.config.fit.get("test_after_fit"):
            return
        ckpt = self.trainer.checkpoint_callback
        best = ckpt.best_model_path if ckpt is not None and getattr(ckpt, "best_model_path", "") else None
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best)


def make_demo_data(argv: list[str]) -> None:
    from rerag.data.synthetic import WorldConfig, write_world

    p = argparse.ArgumentParser(prog="rerag make-demo-data", description="Write the synthetic world as FiD JSONL.")
    p.add_argument("--out", default="data/demo")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for split, path in write_world(args.out, WorldConfig(seed=args.seed)).items():
        print(f"{split}: {path}")


def make_tokenizer(argv: list[str]) -> None:
    from rerag.data.tokenizer import ENGLISH_WORDS, make_demo_tokenizer

    p = argparse.ArgumentParser(prog="rerag make-tokenizer",
                                description="Train the byte-level BPE tokenizer shipped as rerag:assets/demo_tokenizer "
                                            "on English word frequencies.")
    p.add_argument("--out", default="rerag/assets/demo_tokenizer")
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--words", default=ENGLISH_WORDS, help="word list, most frequent first (default: %(default)s)")
    args = p.parse_args(argv)
    print(make_demo_tokenizer(args.out, args.vocab_size, args.words))


def _model_args(p: argparse.ArgumentParser) -> None:
    import torch

    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cpu | cuda (default: cuda when available)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow model code from the model folders (off)")


def export_models(argv: list[str]) -> None:
    from rerag.export import export, load_checkpoint

    p = argparse.ArgumentParser(prog="rerag export", description="Write a Lightning checkpoint's RE and generator as "
                                "Hugging Face folders OUT/estimator and OUT/generator (safetensors, tokenizer, JSON).")
    p.add_argument("--checkpoint", required=True, help="a checkpoint written by `rerag fit`")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--adapters-only", action="store_true",
                   help="write LoRA adapters instead of merged weights (needs base models loaded from a name or path)")
    args = p.parse_args(argv)
    for name, path in export(*load_checkpoint(args.checkpoint), args.out, args.adapters_only).items():
        print(f"{name}: {path}")


def rerank_contexts(argv: list[str]) -> None:
    from rerag.models.estimator import RelevanceEstimator
    from rerag.rerank import rerank_file

    p = argparse.ArgumentParser(prog="rerag rerank", description="Rerank a FiD-format file with an exported RE: "
                                "contexts sorted by the RE's log-odds s, cut to top-k, with re_score (s) and "
                                "re_prob (sigmoid s).")
    p.add_argument("--estimator", required=True, help="the RE folder written by `rerag export` (OUT/estimator)")
    p.add_argument("--input", required=True, help="FiD JSON or JSONL")
    p.add_argument("--output", required=True, help="JSONL, or a JSON list when the name ends with .json")
    p.add_argument("--top-k", type=int, default=None, help="contexts kept per question (default: all)")
    p.add_argument("--batch-size", type=int, default=64, help="contexts of a question per RE forward pass")
    _model_args(p)
    args = p.parse_args(argv)
    estimator = RelevanceEstimator.from_pretrained(args.estimator, args.trust_remote_code).to(args.device)
    n = rerank_file(estimator, args.input, args.output, args.top_k, args.batch_size)
    print(f"{n} questions -> {args.output}")


def predict_file(argv: list[str]) -> None:
    from pathlib import Path

    from rerag.export import load_checkpoint
    from rerag.models.estimator import RelevanceEstimator
    from rerag.models.generator import Generator
    from rerag.predict import predict_file as run
    from rerag.readers import ParametricReader, RAGReader, Seq2SeqLM, load_lm

    p = argparse.ArgumentParser(prog="rerag predict-file", description="One prediction per question (JSONL): the RE's "
                                "top-k, a reader's answer, confidence = max RE over the kept set; below --threshold, "
                                "'unanswerable' or a parametric LLM's answer.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a checkpoint written by `rerag fit`")
    source.add_argument("--export-dir", help="a folder written by `rerag export`")
    p.add_argument("--input", required=True, help="FiD JSON or JSONL (answers optional; needed for the report)")
    p.add_argument("--output", required=True, help="predictions, JSONL")
    p.add_argument("--top-k", type=int, default=25, help="contexts the RE keeps (paper: 25)")
    p.add_argument("--mode", choices=["rag", "ralm"], default="rag",
                   help="rag: per-context answers marginalized with P_RE (eq. 6); ralm: kept contexts in one prompt")
    p.add_argument("--marginalization", choices=["fast", "thorough"], default="fast",
                   help="fast: each answer under its own context; thorough: every candidate under every context")
    p.add_argument("--num-beams", type=int, default=1, help="beams per generation (1 = greedy)")
    p.add_argument("--llm", help="read with this Hugging Face LM (seq2seq, or causal through its chat template) "
                   "instead of the trained generator")
    p.add_argument("--threshold", type=float, help="confidence below which the fallback answers")
    p.add_argument("--fallback-llm", help="a Hugging Face LM that answers low-confidence questions with no context "
                   "(default: answer 'unanswerable')")
    p.add_argument("--batch-size", type=int, default=8, help="questions per reader call")
    _model_args(p)
    args = p.parse_args(argv)
    trust = args.trust_remote_code
    if args.checkpoint:
        estimator, generator = load_checkpoint(args.checkpoint)
    else:
        estimator = RelevanceEstimator.from_pretrained(Path(args.export_dir) / "estimator", trust)
        generator = Generator.from_pretrained(Path(args.export_dir) / "generator", trust)
    lm = load_lm(args.llm, trust) if args.llm else Seq2SeqLM(generator)
    reader = RAGReader(lm.to(args.device), args.mode, args.marginalization, num_beams=args.num_beams)
    fallback = "unanswerable"
    if args.fallback_llm:
        fallback = ParametricReader(load_lm(args.fallback_llm, trust).to(args.device))
    n = run(args.input, args.output, estimator.to(args.device), reader, top_k=args.top_k, threshold=args.threshold,
            fallback=fallback, batch_size=args.batch_size)
    print(f"{n} predictions -> {args.output}")


def unanswerable_report(argv: list[str]) -> None:
    import json
    from pathlib import Path

    from rerag.unanswerable import report

    p = argparse.ArgumentParser(prog="rerag unanswerable-report", description="Search the confidence threshold on "
                                "dev (0.5..0.9, best F1 of 'the kept contexts hold no answer') and report Tables 3 "
                                "and 4 on test.")
    p.add_argument("--dev", required=True, help="`rerag predict-file` output on dev (with gold answers)")
    p.add_argument("--test", required=True, help="`rerag predict-file` output on test (with gold answers)")
    args = p.parse_args(argv)
    dev, test = ([json.loads(line) for line in Path(f).read_text().splitlines() if line.strip()]
                 for f in (args.dev, args.test))
    print(report(dev, test))


def eor_evaluation(argv: list[str]) -> None:
    """`rerag eor --config configs/eor/demo.yaml`: EoR over a pool built on the trained RE-RAG."""
    from jsonargparse import CLI

    from rerag.eor_evaluation import run_eor

    CLI(run_eor, args=argv, prog="rerag eor")


def erag_evaluation(argv: list[str]) -> None:
    """`rerag erag --config configs/erag/demo.yaml`: eRAG of the RE's ranking, JSON + PNG report."""
    from jsonargparse import CLI

    from rerag.erag_evaluation import run_erag

    CLI(run_erag, args=argv, prog="rerag erag")


def pretrain_reader(argv: list[str]) -> None:
    """`rerag pretrain`: pretrain the copy-head reader the demo's generator starts from."""
    from rerag.reader_pretraining import main as pretrain_main

    pretrain_main(argv)


COMMANDS = {"make-demo-data": make_demo_data, "make-tokenizer": make_tokenizer, "pretrain": pretrain_reader,
            "export": export_models, "rerank": rerank_contexts, "predict-file": predict_file,
            "unanswerable-report": unanswerable_report, "eor": eor_evaluation, "erag": erag_evaluation}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in COMMANDS:
        COMMANDS[args[0]](args[1:])
        return
    if args in (["-h"], ["--help"]):
        print(f"package subcommands (each takes --help): {', '.join(COMMANDS)}\n")
    RERAGCLI(RERAGModule, RERAGDataModule, args=argv, save_config_kwargs={"overwrite": True})
