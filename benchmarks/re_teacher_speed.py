"""How fast does the RE train against a frozen teacher? Questions per second of the training step.

Builds the module of a frozen-teacher fit config (`configs/squad_smollm2_teacher.yaml` by default)
and times its training step (forward, backward; the optimizer step is the same in every row and
left out) on the same training questions under seven settings, in one run:

1. live: the teacher (the frozen generator) scores F_ij in every step, whole passages, the title
   and the long instruction in both prompts, 256 prompt tokens (the joint config's prompts), float32;
2. cached: F_ij read from the teacher cache, prompts as in 1 (the cache alone);
3. cached, short prompts: no title, the config's shorter instruction and 192 tokens;
4. cached, short prompts, 60-word windows (`train_context_words`);
5. 4 with the base's weights in bfloat16 and the step under the trainer's bf16-mixed autocast (the
   adapters stay float32);
6. 4 with the prompt prefix that one question's RE rows share (the chat template and the question)
   run once (`erag.lm.decoder_states`), as the models do now;
7. 5 with the shared prefix run once.
Rows 1-5 run every row whole, as they were measured (the models' `share_prefix = False`). Rows 1-4
and 6 run in float32, whatever the config's precision. Rows 1-2, the step before the speed work, keep
the adapter's dropout (0.05), the config's value then; the rest run the config's (none: on a CPU
PEFT's dropout masks cost more than the adapter).

Every row reads the config's number of training contexts per question.

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


#: Model and trainer overrides for each precision, whatever the config sets: float32 weights and no
#: autocast, or the base's weights in bfloat16 and the step under bf16-mixed autocast (kept on a CPU that
#: emulates bf16, to measure it).
FLOAT32 = ["--model.estimator.dtype", "null", "--trainer.precision", "32-true"]
DROPOUT = ["--model.estimator_lora.dropout", "0.05"]  # the RE adapter's dropout before the speed work
BF16 = ["--model.estimator.dtype", "bfloat16", "--trainer.precision", "bf16-mixed", "--allow_emulated_bf16", "true"]


def settings() -> dict[str, tuple[list[str], dict]]:
    """Each row's model and trainer overrides (a build of its own when they differ) and datamodule
    overrides, with whether F comes from the cache."""
    whole_passages = {"train_context_words": None, "train_windows_keep_answer": False}  # no window to place
    long_prompts = {
        "re_template": LONG_RE,
        "generator_template": LONG_GEN,
        "re_max_length": 256,
        "generator_max_length": 256,
        **whole_passages,
    }
    whole = {"share_prefix": False}  # rows 1-5: every row run whole, as measured before the models shared prefixes
    return {
        "live teacher, long prompts": (FLOAT32 + DROPOUT, {"cached": False, **long_prompts, **whole}),
        "cached teacher, long prompts": (FLOAT32 + DROPOUT, {"cached": True, **long_prompts, **whole}),
        "cached, short prompts": (FLOAT32, {"cached": True, **whole_passages, **whole}),
        "cached, short prompts, 60-word windows": (FLOAT32, {"cached": True, **whole}),
        "cached, short prompts, 60-word windows, bf16": (BF16, {"cached": True, **whole}),
        "cached, short prompts, 60-word windows, shared prefix": (FLOAT32, {"cached": True}),
        "cached, short prompts, 60-word windows, bf16, shared prefix": (BF16, {"cached": True}),
    }


def batches(data: RERAGDataModule, n: int) -> list[dict]:
    data.setup("fit")
    loader = iter(data.train_dataloader())
    return [next(loader) for _ in range(n)]


def build(args: list[str]):
    """The fit CLI of `args`, its module's logging a no-op (no trainer runs its loop here)."""
    torch.manual_seed(0)
    cli = build_fit(args)
    cli.model.log_dict = lambda *a, **k: None
    return cli


def time_steps(module, rows: list[dict], precision, warmup: int = 1) -> float:
    """Seconds per question of forward and backward over `rows` (one batch each), after `warmup`
    untimed steps on the first rows (a compiled model compiles there, for each shape it meets).
    `precision`: the trainer's precision plugin, whose autocast wraps the forward as in `fit`."""
    module.train()
    for i, batch in enumerate(rows[:warmup] + rows):
        if i == warmup:
            start = time.perf_counter()
        with precision.forward_context():
            loss = module.training_step(batch, i)
        loss.backward()
        module.zero_grad(set_to_none=True)
    return (time.perf_counter() - start) / sum(len(b["ids"]) for b in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=Path("configs/squad_smollm2_teacher.yaml"))
    p.add_argument("--questions", type=int, default=6, help="timed training questions per setting")
    args = p.parse_args()
    # every row's F is the answer's alone (eq. 8), as the rows were measured: the config's question
    # template adds a cached log P(q | c), which the live rows would have no cache to read from; and every
    # row times the RE's step, so without the config's first stage, in which the generator trains
    common = ["--config", str(args.config), "--trainer.logger", "false", "--model.teacher_question_template", "null"]
    common += ["--model.generator_steps", "0", "--model.generator_lora", "null"]
    built: dict[str, object] = {}
    results = {}
    for name, (model_args, row) in settings().items():
        key = " ".join(model_args)
        if key not in built:
            built = {key: build(common + model_args)}  # one model in memory at a time
            teacher, _ = built[key].model.teacher_generator()
        cli = built[key]
        module = cli.model
        base = {k: v for k, v in cli.datamodule.hparams.items() if not k.startswith("_")}  # not _class_path
        row = dict(row)
        cached = row.pop("cached")
        share = row.pop("share_prefix", True)
        module.estimator.share_prefix = module.generator.share_prefix = teacher.share_prefix = share
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
        results[name] = (time_steps(module, rows, cli.trainer.precision_plugin), tokens)
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
