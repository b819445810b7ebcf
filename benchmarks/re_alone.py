"""Does an RE setting learn at all? The RE alone against a fixed generator, for any fit config.

Builds the fit config's module and data (arguments after `--` override the config as in `rerag
fit`), loads the generator's weights from `--checkpoint` when given (the RE stays as the config
builds it), then trains only the RE (`RERAGModule.estimator_parameters`, the config's
`estimator_lr`, accumulation and clipping) on L_gen + L_re + L_tok (eq. 12) with the generator's
F_ij (eq. 8) fixed: computed once per (question, answer, contexts) and kept in `--scores`, so a
second setting skips the generator. Prints dev Recall@1 of the RE (by `has_answer`, and by `gold`
when the data has it) against the retriever's, at step 0 (the untrained RE) and every
`--eval-every` optimizer steps. Where `re_depth.py` and `re_learnability.py` try the demo's
random-init RE, this tries any RE the config can build: a LoRA adapter on a causal LM included.

    python benchmarks/re_alone.py --config configs/squad_smollm2.yaml \\
        --checkpoint outputs/squad_smollm2/checkpoints/final.ckpt --scores outputs/re_alone_squad_F.pt \\
        --steps 60 --eval-every 20 --dev-questions 30 -- --model.estimator_lora.layers_to_transform null
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import torch

from rerag.fit_config import build_fit


def build(config: Path, overrides: list[str]):
    """The config's module and datamodule (set up for fit) and its trainer settings, as `rerag fit` parses them."""
    cli = build_fit(["--config", str(config), *overrides])
    cli.datamodule.setup("fit")
    return cli.model, cli.datamodule, cli.config["trainer"], cli.config["seed_everything"]


def load_weights(module, checkpoint: Path, with_estimator: bool = False) -> int:
    """Copy the generator's weights from a fit checkpoint, not the RE's (its shape may differ here),
    or with `with_estimator` every tensor, to go on from a `--save`d file; returns how many tensors
    were loaded."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    if with_estimator:
        module.load_state_dict(state)
        return len(state)
    adapter = module.generator.adapter
    if adapter is not None:  # a shared base: the generator is its adapter; the frozen base is the config's
        wanted = {k: v for k, v in state.items() if f".{adapter}." in k}
    else:
        wanted = {k: v for k, v in state.items() if k.startswith("generator.")}
    own = module.state_dict()
    missing = [k for k in wanted if k not in own or own[k].shape != wanted[k].shape]
    if not wanted or missing:
        raise SystemExit(
            f"{checkpoint}: no generator weights matching this config's ({len(missing)} of "
            f"{len(wanted)} differ, e.g. {missing[:2]})"
        )
    module.load_state_dict(wanted, strict=False)
    return len(wanted)


def save_with_estimator(module, checkpoint: Path, out: Path) -> None:
    """Write fit checkpoint `checkpoint` with `module`'s weights and settings: its generator and the
    RE trained here, for `rerag test --ckpt_path`, `rerag export` and `predict-file`. Its optimizer
    state is dropped (it was the joint run's): the file evaluates, it does not resume."""
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=False)
    ckpt["state_dict"] = module.state_dict()
    ckpt["hyper_parameters"] = dict(module.hparams)
    for key in ("optimizer_states", "lr_schedulers", "loops"):
        ckpt.pop(key, None)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, out)


def batch_key(batch: dict, i: int) -> str:
    """A training question's identity for the F cache: its id, sampled answer and contexts."""
    return "|".join([batch["ids"][i], str(batch["labels"][i].tolist()), *(c["id"] for c in batch["contexts"][i])])


@torch.no_grad()
def answer_loglik(module, batch: dict, cache: dict) -> torch.Tensor:
    """F [b, k] of the batch, from `cache` where it holds the question, else from the generator."""
    b, k = len(batch["ids"]), int(batch["n_contexts"][0])
    keys = [batch_key(batch, i) for i in range(b)]
    if any(key not in cache for key in keys):
        labels = batch["labels"].repeat_interleave(k, dim=0)
        scores = (
            module.generator.answer_loglik(batch["gen"]["input_ids"], batch["gen"]["attention_mask"], labels)
            .view(b, k)
            .float()
        )
        cache.update(zip(keys, scores))
    return torch.stack([cache[key] for key in keys])


@torch.no_grad()
def dev_recall_at_1(module, loader, n_questions: int) -> dict[str, float]:
    """Recall@1 over each dev question's contexts: the RE's top context and the retriever's first,
    by `has_answer` and (when the data has it) by `gold`."""
    module.eval()
    hits: dict[str, list[bool]] = {}
    for batch in loader:
        s = module.relevance_scores(batch["re"])
        counts = batch["n_contexts"].tolist()
        for start, n in zip(itertools.accumulate([0, *counts]), counts):
            best = start + int(s[start : start + n].argmax())
            for field in ("has_answer", "gold"):
                if field in batch:
                    hits.setdefault(f"re_{field}", []).append(bool(batch[field][best]))
                    hits.setdefault(f"retriever_{field}", []).append(bool(batch[field][start]))
        if len(hits["re_has_answer"]) >= n_questions:
            break
    module.train()
    return {name: sum(v[:n_questions]) / len(v[:n_questions]) for name, v in hits.items()}


def main() -> None:
    argv = sys.argv[1:]
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True, help="a `rerag fit` config")
    p.add_argument(
        "--checkpoint", type=Path, default=None, help="fit checkpoint whose generator teaches (default: the config's)"
    )
    p.add_argument("--scores", type=Path, default=None, help="file caching F_ij across calls")
    p.add_argument("--steps", type=int, default=100, help="optimizer steps")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--dev-questions", type=int, default=50)
    p.add_argument(
        "--resume",
        action="store_true",
        help="--checkpoint is a --save'd file: start from its RE too (a fresh optimizer; the data order starts over)",
    )
    p.add_argument(
        "--save",
        type=Path,
        default=None,
        help="write --checkpoint with the RE trained here, for `rerag test --ckpt_path` (with the same overrides)",
    )
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if (args.save or args.resume) and not args.checkpoint:
        p.error("--save and --resume need --checkpoint")

    module, data, trainer, seed = build(args.config, overrides)
    torch.manual_seed(seed or 0)
    if args.checkpoint:
        loaded = load_weights(module, args.checkpoint, with_estimator=args.resume)
        print(
            f"{'generator and RE' if args.resume else 'generator'}: {loaded} tensors from {args.checkpoint}", flush=True
        )
    cache = torch.load(args.scores) if args.scores and args.scores.exists() else {}
    cached_before = len(cache)
    hp = module.hparams
    params = module.estimator_parameters()
    optimizer = torch.optim.AdamW(params, lr=hp.estimator_lr or hp.lr, weight_decay=hp.weight_decay)
    accumulate, clip = trainer["accumulate_grad_batches"], trainer["gradient_clip_val"]
    val = data.val_dataloader()
    rows = [(0, 0.0, float("nan"), dev_recall_at_1(module, val, args.dev_questions))]
    print(rows[-1], flush=True)
    start, train_time, step, epoch, losses = time.time(), 0.0, 0, 0, []
    while step < args.steps:
        loader = data.train_dataloader()
        loader.sampler.set_epoch(epoch)
        for i, batch in enumerate(loader):
            tick = time.time()
            loss = module.relevance_losses(batch, answer_loglik(module, batch, cache))
            (loss["loss"] / accumulate).backward()
            losses.append(float(loss["loss_re"].detach()))
            if (i + 1) % accumulate == 0:
                if clip:
                    torch.nn.utils.clip_grad_norm_(params, clip)
                optimizer.step()
                optimizer.zero_grad()
                step += 1
            train_time += time.time() - tick
            if (i + 1) % accumulate == 0 and (step % args.eval_every == 0 or step == args.steps):
                rows.append(
                    (step, train_time / 60, sum(losses) / len(losses), dev_recall_at_1(module, val, args.dev_questions))
                )
                print(rows[-1], flush=True)
                losses = []
            if step == args.steps:
                break
        epoch += 1
    if args.scores and len(cache) > cached_before:
        torch.save(cache, args.scores)
    if args.save:
        save_with_estimator(module, args.checkpoint, args.save)

    names = list(rows[0][3])
    print(
        f"\nThe RE alone, {args.config.name} {' '.join(overrides)}: dev Recall@1 over "
        f"{data.hparams.n_eval_contexts} contexts ({args.dev_questions} questions); F_ij for "
        f"{len(cache)} training questions ({cached_before} from {args.scores}); {(time.time() - start) / 60:.1f} min\n"
    )
    print("| step | training minutes | mean train/loss_re | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for step, minutes, loss_re, recall in rows:
        print(f"| {step} | {minutes:.1f} | {loss_re:.3f} | " + " | ".join(f"{recall[n]:.3f}" for n in names) + " |")


if __name__ == "__main__":
    main()
