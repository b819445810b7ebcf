"""How fast does the relevance estimator learn a dataset from a fixed reader's signal?

For each RE tokenizer (`model.re_tokenizer`), runs `rerag fit` of the demo config with the RE
alone against the frozen reader (the config's generator, the shipped reader, or `--reader`;
`re_alone.py`'s fit: `model.freeze_generator`, its F_ij (eq. 8) for each training question's top
`n_train_contexts` cached in `--teacher-cache`, computed once for every tokenizer), the RE from
random init of the config's RE shape, trained on L_gen + L_re + L_tok (eq. 12) with no deep
contexts and no has-answer anchor; prints the module's own dev Recall@1 (`val/re_recall@1`, over
`n_eval_contexts`) by step, one row per RE tokenizer. The default data is the foreign world
(`python benchmarks/foreign_world.py --out data/foreign` writes it; `demo_learning.py` does too).
A check in minutes, instead of the demo's joint run, of whether the RE can learn a dataset with a
given tokenizer; it chose the demo tokenizer (BENCHMARKS.md). The RE never sees `has_answer`; dev
Recall@1 does. Arguments after `--` override the config as in `rerag fit`.

    OMP_NUM_THREADS=1 python benchmarks/re_learnability.py --data data/foreign \\
        --tokenizers rerag:assets/demo_tokenizer,outputs/old_demo_tokenizer
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import yaml
from re_alone import build, fit, frozen_teacher_overrides

from rerag.models.loading import ModelSpec, architecture

ROOT = Path(__file__).resolve().parent.parent


def mean_input_tokens(data, questions: int = 50) -> float:
    """Mean RE input length (tokens) of the training contexts of the first batches, `questions` questions."""
    lengths = [
        batch["re"]["attention_mask"].sum(dim=1)
        for batch in itertools.islice(data.train_dataloader(), -(-questions // data.hparams.batch_size))
    ]
    return float(sum(int(n.sum()) for n in lengths) / sum(len(n) for n in lengths))


def main() -> None:
    argv = sys.argv[1:]
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "data" / "foreign", help="folder with train.jsonl, dev.jsonl")
    p.add_argument("--tokenizers", default="rerag:assets/demo_tokenizer", help="comma-separated RE tokenizers")
    p.add_argument(
        "--reader", default=None, help="the teacher (model.teacher.name_or_path; default: the config's generator)"
    )
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml", help="RE shape, lr, lengths, K")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--lr", type=float, default=None, help="the RE's learning rate (default: the config's lr)")
    p.add_argument("--teacher-cache", type=Path, default=ROOT / "outputs" / "teacher_cache")
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    estimator = architecture(ModelSpec(**yaml.safe_load(args.config.read_text())["model"]["estimator"]))
    common = [
        *frozen_teacher_overrides(args.teacher_cache, args.steps),
        *("--data.class_path", "rerag.data.datamodule.RERAGDataModule"),
        *("--data.init_args.train_file", str(args.data / "train.jsonl")),
        *("--data.init_args.val_file", str(args.data / "dev.jsonl")),
        *("--data.init_args.n_deep_contexts", "0", "--trainer.limit_val_batches", "1.0"),
        *("--model.estimator.name_or_path", "null", "--model.estimator.config", json.dumps(estimator)),
        *("--model.estimator_lr", json.dumps(args.lr)),  # null: the RE trains at the config's lr
        *("--model.alpha_anchor", "0.0"),
        *(["--model.teacher.name_or_path", args.reader] if args.reader else []),
    ]
    rows = []
    for name in args.tokenizers.split(","):
        cli = build(args.config, [*common, "--model.re_tokenizer", name, *overrides])
        points = fit(cli, args.eval_every)
        rows.append((name, mean_input_tokens(cli.datamodule), points))
        n_dev = len(cli.model.results["val"])
    bm25 = rows[0][2][0]["retriever_recall@1"]
    steps = [point["step"] for point in rows[0][2]]  # step 0: the RE before training
    print(f"\nDev RE Recall@1 by step ({n_dev} questions, BM25 Recall@1 {bm25:.3f}):\n")
    print("| RE tokenizer | tokens per input | training minutes | " + " | ".join(map(str, steps)) + " |")
    print("|---|---|---|" + "---|" * len(steps))
    for name, tokens, points in rows:
        print(
            f"| {name} | {tokens:.0f} | {points[-1]['minutes']:.1f} | "
            + " | ".join(f"{p['re_recall@1']:.3f}" for p in points)
            + " |"
        )


if __name__ == "__main__":
    main()
