"""Does the RE hold over BM25's top 100? Training-context sampling against depth, in minutes.

For each strategy, runs `rerag fit` of the demo config with the RE alone against the frozen reader
(the config's generator, the shipped reader; `re_alone.py`'s fit: `model.freeze_generator`, its
F_ij (eq. 8) cached in `--teacher-cache` once per training-context setting), the RE from random
init of the config's RE shape, on the first `--train-questions` training questions, L_gen + L_re
+ L_tok (eq. 12); and prints, by step from step 0 (the RE before training), the module's own dev
Recall@1 over the top 100 (`val/re_recall@1`) and over the top `--shallow` (`val/top20/re_recall@1`,
`model.eval_depths`) on the first `--dev-questions` dev questions, and the AUROC of the raw
set-level confidence (max_j s, for "the RE's top 5 of the top 100 hold an answer"), from the
module's per-question dev results (`rerag.metrics.auroc`, `hits_at_k`). A strategy is `N+M`:
BM25's top N contexts plus M drawn uniformly from ranks N..100 (`data.n_train_contexts`,
`data.n_deep_contexts`); `top20` is the paper's 20+0; `N+M@D` draws the M from ranks N..D
(`data.deep_context_depth`); an `anchor` suffix adds the has-answer anchor (`model.alpha_anchor`
1.0), `anchorW` with weight W (else 0). `--estimator` starts the RE from a checkpoint instead
(e.g. the shipped relevance-pretrained RE, `rerag:assets/relevance_estimator`, which the demo
config starts from, or the shipped reader). Arguments after `--` override the config as in `rerag fit`.

    python benchmarks/re_depth.py --strategies top20,12+8,12+8anchor --steps 600
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml
from re_alone import build, fit, frozen_teacher_overrides

from rerag.data.fid_format import read_fid
from rerag.metrics import auroc, hits_at_k
from rerag.models.loading import ModelSpec, architecture

ROOT = Path(__file__).resolve().parent.parent


def first_records(source: Path, n: int, out: Path) -> Path:
    """The first `n` records of FiD file `source` as JSONL at `out` (the same bytes on every call,
    so the teacher cache, keyed by the training file's bytes, is read back)."""
    records = read_fid(source)
    out.write_text("".join(json.dumps(r) + "\n" for _, r in zip(range(n), records)))
    return out


def strategy_overrides(name: str) -> list[str]:
    """`rerag fit` arguments of a strategy: `top20`, `N+M` or `N+M@D`, with an optional `anchor[W]`."""
    spec, anchored, weight = name.partition("anchor")
    spec, _, deep_depth = spec.partition("@")
    n_top, n_deep = (20, 0) if spec == "top20" else map(int, spec.split("+"))
    return [
        *("--data.init_args.n_train_contexts", str(n_top), "--data.init_args.n_deep_contexts", str(n_deep)),
        *("--data.init_args.deep_context_depth", deep_depth or "null"),
        *("--model.alpha_anchor", str(float(weight or 1.0) if anchored else 0.0)),
    ]


def set_confidence_auroc(module, keep: int = 5) -> dict[str, float]:
    """AUROC of max_j s (each dev question's top RE score) for "the RE's top `keep` hold an answer",
    over the questions of the latest validation (`RERAGModule.results`)."""
    results = module.results["val"]
    held = hits_at_k([r["first_hit"]["re"]["has_answer"] for r in results], keep)
    return {"set_auroc": auroc([r["contexts"][0]["re_score"] for r in results], held)}


def main() -> None:
    argv = sys.argv[1:]
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "data" / "demo", help="the demo world (written by rerag fit)")
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    p.add_argument("--strategies", default="top20,12+8,12+8anchor")
    p.add_argument("--train-questions", type=int, default=600)
    p.add_argument("--dev-questions", type=int, default=100)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--shallow", type=int, default=20, help="the second, shallower depth of dev Recall@1")
    p.add_argument(
        "--estimator", default=None, help="RE checkpoint to start from (default: random init of the config's RE shape)"
    )
    p.add_argument("--lr", type=float, default=None, help="the RE's learning rate (default: the config's lr)")
    p.add_argument("--teacher-cache", type=Path, default=ROOT / "outputs" / "teacher_cache")
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    estimator = (
        ModelSpec(name_or_path=args.estimator)
        if args.estimator
        else ModelSpec(config=architecture(ModelSpec(**yaml.safe_load(args.config.read_text())["model"]["estimator"])))
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = [
            *("--data.class_path", "rerag.data.datamodule.RERAGDataModule"),
            "--data.init_args.train_file",
            str(first_records(args.data / "train.jsonl", args.train_questions, Path(tmp) / "train.jsonl")),
            "--data.init_args.val_file",
            str(first_records(args.data / "dev.jsonl", args.dev_questions, Path(tmp) / "dev.jsonl")),
            *("--trainer.limit_val_batches", "1.0"),
        ]
        model = [
            *("--model.estimator.name_or_path", estimator.name_or_path or "null"),
            *("--model.estimator.config", json.dumps(estimator.config)),
            *("--model.estimator_lr", json.dumps(args.lr)),  # null: the RE trains at the config's lr
            *("--model.eval_depths", json.dumps([args.shallow])),
        ]
        for name in args.strategies.split(","):
            cli = build(
                args.config,
                [
                    *frozen_teacher_overrides(args.teacher_cache, args.steps),
                    *data,
                    *model,
                    *strategy_overrides(name),
                    *overrides,
                ],
            )
            depth = cli.datamodule.hparams.n_eval_contexts
            rows.append((name, fit(cli, args.eval_every, extra=set_confidence_auroc)))
            n_dev = len(cli.model.results["val"])
    print(
        f"\nDev RE Recall@1 over the top {depth} / the top {args.shallow} / AUROC of max s for \"the RE's top 5 of "
        f'{depth} hold an answer" by step ({n_dev} questions):\n'
    )
    steps = [point["step"] for point in rows[0][1]]  # step 0: the RE before training
    print("| strategy | training minutes | " + " | ".join(map(str, steps)) + " |\n|---|---|" + "---|" * len(steps))
    shallow = f"top{args.shallow}/re_recall@1"
    for name, points in rows:
        print(
            f"| {name} | {points[-1]['minutes']:.1f} | "
            + " | ".join(f"{p['re_recall@1']:.2f} / {p[shallow]:.2f} / {p['set_auroc']:.2f}" for p in points)
            + " |"
        )


if __name__ == "__main__":
    main()
