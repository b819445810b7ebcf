"""Does the RE hold over BM25's top 100? Training-context sampling against depth, in minutes.

Scores the first `--train-questions` training questions' 100 contexts once with the shipped reader
(F_ij, eq. 8), then trains the demo config's RE shape from random init alone on L_gen + L_re + L_tok (eq. 12)
with F fixed, once per strategy, and prints dev Recall@1 over the top 100 and over the top 20, and
the AUROC of the raw set-level confidence (max_j s over the RE's top 5 of the top 100, for "they
hold an answer"), by step, from step 0 (the RE before training). A strategy is `N+M`: BM25's top N contexts plus M
drawn uniformly from ranks N..100 (`rerag.data.datamodule.sample_deep_contexts`, as
`data.n_deep_contexts` draws them); `top20` is the paper's 20+0; `N+M@D` draws the M from ranks
N..D; an `anchor` suffix adds the has-answer anchor (`model.alpha_anchor` 1.0), `anchorW` with weight W.
`--estimator` starts the RE from a checkpoint instead (e.g. the shipped relevance-pretrained RE,
`rerag:assets/relevance_estimator`, which the demo config starts from, or the shipped reader); `--scores` keeps F in a file, so later calls skip the reader.

    python benchmarks/re_depth.py --strategies top20,12+8,12+8anchor --steps 600
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import torch
import yaml
from re_learnability import encode, reader_scores

from erag.lm import load_tokenizer
from rerag.data.datamodule import sample_deep_contexts
from rerag.data.fid_format import read_fid
from rerag.losses import rerag_loss
from rerag.metrics import auroc
from rerag.models.estimator import RelevanceEstimator
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, architecture, build_model

ROOT = Path(__file__).resolve().parent.parent


@torch.no_grad()
def evaluate(
    estimator: RelevanceEstimator, records: list[dict], depth: int, max_length: int, keep: int = 5
) -> tuple[float, float]:
    """Recall@1 over the first `depth` contexts, and the AUROC of the set-level confidence max_j s
    for "the RE's top `keep` hold an answer" (the raw set-level confidence)."""
    estimator.eval()
    hits, confidence, held = 0, [], []
    for record in records:
        enc = encode(estimator.tokenizer, estimator.template, [record], depth, max_length)
        s = estimator(enc["input_ids"], enc["attention_mask"])
        kept = s.topk(min(keep, len(s))).indices.tolist()
        hits += record["ctxs"][kept[0]]["has_answer"]
        confidence.append(float(s.max()))
        held.append(any(record["ctxs"][j]["has_answer"] for j in kept))
    estimator.train()
    return hits / len(records), auroc(confidence, held)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "data" / "demo", help="the demo world (written by rerag fit)")
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    p.add_argument("--strategies", default="top20,12+8,12+8anchor")
    p.add_argument("--train-questions", type=int, default=600)
    p.add_argument("--dev-questions", type=int, default=100)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument(
        "--estimator", default=None, help="RE checkpoint to start from (default: random init of the config's RE shape)"
    )
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the config's)")
    p.add_argument("--scores", type=Path, default=None, help="file caching the reader's F_ij for these questions")
    args = p.parse_args()
    cfg = yaml.safe_load(args.config.read_text())
    model, batch, length = cfg["model"], cfg["data"]["init_args"]["batch_size"], cfg["model"]["re_max_length"]
    train = list(read_fid(args.data / "train.jsonl"))[: args.train_questions]
    dev = list(read_fid(args.data / "dev.jsonl"))[: args.dev_questions]
    depth = min(len(r["ctxs"]) for r in train)
    start = time.time()
    if args.scores and args.scores.exists():
        answer_loglik = torch.load(args.scores)
    else:
        reader = Generator.from_pretrained("rerag:assets/reader", max_answer_length=model["max_answer_length"])
        answer_loglik = reader_scores(reader, train, depth, model["generator_max_length"], batch=1)
        print(f"reader scores for {len(train)} x {depth} pairs: {time.time() - start:.0f} s", flush=True)
        if args.scores:
            torch.save(answer_loglik, args.scores)
    if answer_loglik.shape != (len(train), depth):
        raise SystemExit(f"{args.scores} holds F for {tuple(answer_loglik.shape)} pairs, not {(len(train), depth)}")
    spec_of_re = (
        ModelSpec(name_or_path=args.estimator)
        if args.estimator
        else ModelSpec(config=architecture(ModelSpec(**model["estimator"])))
    )
    rows = []
    for name in args.strategies.split(","):
        spec, anchored, anchor_weight = name.partition("anchor")
        anchor_weight = float(anchor_weight or 1.0) if anchored else 0.0
        spec, _, deep_depth = spec.partition("@")
        n_top, n_deep = (20, 0) if spec == "top20" else map(int, spec.split("+"))
        deep_depth = int(deep_depth) if deep_depth else depth
        torch.manual_seed(cfg["seed_everything"])
        rng = random.Random(cfg["seed_everything"])
        tokenizer = load_tokenizer(model["re_tokenizer"])
        estimator = RelevanceEstimator(
            build_model(spec_of_re, tokenizer),
            tokenizer,
            model["true_word"],
            model["false_word"],
            model["re_template"],
            length,
        )
        optimizer = torch.optim.AdamW(
            estimator.parameters(), lr=args.lr or model["lr"], weight_decay=model["weight_decay"]
        )

        def point() -> tuple[float, float, float]:
            deep, set_auroc = evaluate(estimator, dev, depth, length)
            return deep, evaluate(estimator, dev, 20, length)[0], set_auroc

        curve, start = [point()], time.time()
        for step in range(1, args.steps + 1):
            idx = [rng.randrange(len(train)) for _ in range(batch)]
            ranks = [sample_deep_contexts(list(range(depth)), n_top, n_deep, deep_depth, rng) for _ in idx]
            records = [{**train[i], "ctxs": [train[i]["ctxs"][j] for j in r]} for i, r in zip(idx, ranks)]
            k = n_top + n_deep
            enc = encode(tokenizer, estimator.template, records, k, length)
            log_p_true, log_p_false = estimator.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
            has_answer = torch.tensor([[c["has_answer"] for c in r["ctxs"]] for r in records])
            loss = rerag_loss(
                log_p_true.view(batch, k),
                log_p_false.view(batch, k),
                torch.stack([answer_loglik[i, r] for i, r in zip(idx, ranks)]),
                model["alpha_re"],
                model["alpha_tok"],
                model["kl_direction"],
                anchor_weight,
                has_answer,
            )["loss"]
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(estimator.parameters(), cfg["trainer"]["gradient_clip_val"])
            optimizer.step()
            if step % args.eval_every == 0:
                curve.append(point())
                print(name, step, curve[-1], flush=True)
        rows.append((name, (time.time() - start) / 60, curve))
    steps = range(0, args.steps + 1, args.eval_every)  # step 0: the RE before training
    print(
        f"\nDev RE Recall@1 over the top {depth} / the top 20 / AUROC of max s for \"the RE's top 5 of {depth} hold"
        f' an answer" by step ({len(dev)} questions):\n'
    )
    print("| strategy | minutes | " + " | ".join(map(str, steps)) + " |\n|---|---|" + "---|" * len(steps))
    for name, minutes, curve in rows:
        print(f"| {name} | {minutes:.1f} | " + " | ".join(f"{a:.2f} / {b:.2f} / {c:.2f}" for a, b, c in curve) + " |")


if __name__ == "__main__":
    main()
