"""How fast does the RE train against a frozen teacher? Questions per second of the training step.

Builds the module of a frozen-teacher fit config once (`configs/squad_smollm2_teacher.yaml` by
default) and times its training step (forward, backward; the optimizer step is the same in every
row and left out) on the same training questions under four settings, in one run:

1. live: the teacher (the frozen generator) scores F_ij in every step, whole passages, the title
   and the long instruction in both prompts, 256 prompt tokens (the joint config's prompts);
2. cached: F_ij read from the teacher cache, prompts as in 1 (the cache alone);
3. cached, short prompts: no title, the config's shorter instruction and 192 tokens;
4. cached, short prompts, 60-word windows: the config as shipped (`train_context_words`).

    python benchmarks/re_teacher_speed.py --questions 6
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from rerag.data.datamodule import RERAGDataModule
from rerag.fit_config import build_fit
from rerag.teacher_cache import build_teacher_scores

LONG_RE = "Does the context answer the question? Answer true or false.\nQuestion: {question}\nContext: {title}. {text}"
LONG_GEN = (
    "Answer the question with a short span copied from the context.\nContext: {title}. {text}\nQuestion: {question}"
)


def settings() -> dict[str, dict]:
    """Each row's datamodule overrides and whether F comes from the cache."""
    long_prompts = {
        "re_template": LONG_RE,
        "generator_template": LONG_GEN,
        "re_max_length": 256,
        "generator_max_length": 256,
        "train_context_words": None,
    }
    return {
        "live teacher, long prompts": {"cached": False, **long_prompts},
        "cached teacher, long prompts": {"cached": True, **long_prompts},
        "cached, short prompts": {"cached": True, "train_context_words": None},
        "cached, short prompts, 60-word windows": {"cached": True},
    }


def batches(data: RERAGDataModule, n: int) -> list[dict]:
    data.setup("fit")
    loader = iter(data.train_dataloader())
    return [next(loader) for _ in range(n)]


def time_steps(module, rows: list[dict]) -> float:
    """Seconds per question of forward and backward over `rows` (one batch each), after one warm-up."""
    module.train()
    for i, batch in enumerate([rows[0], *rows]):
        if i == 1:
            start = time.perf_counter()
        module.training_step(batch, i).backward()
        module.zero_grad(set_to_none=True)
    return (time.perf_counter() - start) / sum(len(b["ids"]) for b in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=Path("configs/squad_smollm2_teacher.yaml"))
    p.add_argument("--questions", type=int, default=6, help="timed training questions per setting")
    args = p.parse_args()
    torch.manual_seed(0)
    cli = build_fit(["--config", str(args.config), "--trainer.logger", "false"])
    module = cli.model
    base = {k: v for k, v in cli.datamodule.hparams.items() if not k.startswith("_")}  # not _class_path
    module.log_dict = lambda *a, **k: None  # no trainer attached: the step's logging is a no-op here
    teacher, _ = module.teacher_generator()
    results = {}
    for name, row in settings().items():
        cached = row.pop("cached")
        data = RERAGDataModule(**(base | row))
        rows = batches(data, args.questions)
        module.teacher_scores = None
        if cached:
            triples = [
                (q, t, c) for b in rows for q, t, cs in zip(b["questions"], b["targets"], b["contexts"]) for c in cs
            ]
            teacher.template = data.hparams.generator_template
            teacher.max_length = data.hparams.generator_max_length
            module.teacher_scores = build_teacher_scores(teacher, triples)
        tokens = sum(int(b["re"]["attention_mask"].sum()) for b in rows) / sum(int(b["n_contexts"].sum()) for b in rows)
        results[name] = (time_steps(module, rows), tokens)
        print(name, results[name], flush=True)

    baseline = next(iter(results.values()))[0]
    own = results["cached teacher, long prompts"][0]
    print(
        f"\nRE training step, {args.config.name}, {args.questions} questions x "
        f"{base['n_train_contexts']} contexts per setting, {torch.get_num_threads()} threads\n"
    )
    print(
        "| setting | RE prompt tokens per context | s per question | questions/s | vs live | vs cached, long prompts |"
    )
    print("|---|---|---|---|---|---|")
    for name, (seconds, tokens) in results.items():
        print(
            f"| {name} | {tokens:.0f} | {seconds:.2f} | {1 / seconds:.3f} | {baseline / seconds:.2f}x | {own / seconds:.2f}x |"
        )


if __name__ == "__main__":
    main()
