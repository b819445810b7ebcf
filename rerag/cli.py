"""The `rerag` command: LightningCLI's fit, validate, test and predict, plus the package's
own subcommands (`rerag make-demo-data`, `rerag make-tokenizer`)."""
from __future__ import annotations

import argparse
import sys

from lightning.pytorch.cli import LightningCLI

from rerag.data.datamodule import RERAGDataModule
from rerag.module import RERAGModule


class RERAGCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # The data side tokenizes with the models' own tokenizers and input settings.
        for name in ("re_tokenizer", "generator_tokenizer", "re_template", "re_max_length", "max_answer_length"):
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
    from rerag.data.tokenizer import make_demo_tokenizer

    p = argparse.ArgumentParser(prog="rerag make-tokenizer",
                                description="Train the byte-level BPE tokenizer shipped as rerag:assets/demo_tokenizer.")
    p.add_argument("--out", default="rerag/assets/demo_tokenizer")
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(make_demo_tokenizer(args.out, args.vocab_size, args.seed))


COMMANDS = {"make-demo-data": make_demo_data, "make-tokenizer": make_tokenizer}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in COMMANDS:
        COMMANDS[args[0]](args[1:])
        return
    RERAGCLI(RERAGModule, RERAGDataModule, args=argv, save_config_kwargs={"overwrite": True})
