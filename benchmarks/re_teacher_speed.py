"""How fast does the RE train against a frozen teacher? Questions per second of the training step.

Builds the module of a frozen-teacher fit config (the SmolLM2 base with `configs/squad_smollm2_teacher.yaml` by default)
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

import torch
from common import (
    BF16,
    FLOAT32,
    LONG_GEN,
    LONG_RE,
    RE_DROPOUT,
    add_config_argument,
    batches,
    build,
    config_args,
    rebuilt_data,
    time_steps,
)

from rerag.teacher_cache import build_teacher_scores


def settings() -> dict[str, tuple[list[str], dict]]:
    """Each row's model and trainer overrides (a build of its own when they differ) and datamodule
    overrides (`common.rebuilt_data`: `inputs` holds the prompt fields the datamodule reads), with
    whether F comes from the cache."""
    whole_passages = {"train_context_words": None, "train_windows_keep_answer": False}  # no window to place
    long_prompts = {
        "inputs": {
            "re_template": LONG_RE,
            "generator_template": LONG_GEN,
            "re_max_length": 256,
            "generator_max_length": 256,
        },
        **whole_passages,
    }
    whole = {"share_prefix": False}  # rows 1-5: every row run whole, as measured before the models shared prefixes
    return {
        "live teacher, long prompts": (FLOAT32 + RE_DROPOUT, {"cached": False, **long_prompts, **whole}),
        "cached teacher, long prompts": (FLOAT32 + RE_DROPOUT, {"cached": True, **long_prompts, **whole}),
        "cached, short prompts": (FLOAT32, {"cached": True, **whole_passages, **whole}),
        "cached, short prompts, 60-word windows": (FLOAT32, {"cached": True, **whole}),
        "cached, short prompts, 60-word windows, bf16": (BF16, {"cached": True, **whole}),
        "cached, short prompts, 60-word windows, shared prefix": (FLOAT32, {"cached": True}),
        "cached, short prompts, 60-word windows, bf16, shared prefix": (BF16, {"cached": True}),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_config_argument(p, "squad_smollm2_teacher.yaml")
    p.add_argument("--questions", type=int, default=6, help="timed training questions per setting")
    args = p.parse_args()
    # every row's F is the answer's alone (eq. 8), as the rows were measured: the config's question
    # template adds a cached log P(q | c), which the live rows would have no cache to read from; and every
    # row times the RE's step, so without the config's first stage, in which the generator trains
    common = [*config_args(args.config), "--trainer.logger", "false"]
    common += ["--model.teacher.question_template", "null"]
    common += [
        "--model.stages",
        '[{"train": "estimator", "re_learns_from": "teacher"}]',
        "--model.assembly.generator_lora",
        "null",
    ]
    built: dict[str, object] = {}
    results = {}
    for name, (model_args, row) in settings().items():
        key = " ".join(model_args)
        if key not in built:
            built = {key: build(common + model_args)}  # one model in memory at a time
            teacher, _ = built[key].model.frozen_teacher()
        cli = built[key]
        module = cli.model
        row = dict(row)
        cached = row.pop("cached")
        share = row.pop("share_prefix", True)
        module.estimator.share_prefix = module.generator.share_prefix = teacher.share_prefix = share
        data = rebuilt_data(cli.datamodule, row)
        rows = batches(data, args.questions)
        module.teacher_scores = None
        if cached:
            triples = [
                (q, t, c) for b in rows for q, t, cs in zip(b["questions"], b["targets"], b["contexts"]) for c in cs
            ]
            teacher.template = data.inputs.generator_template
            teacher.max_length = data.inputs.generator_max_length
            module.teacher_scores = build_teacher_scores(teacher, triples)
        tokens = sum(int(b["re"]["attention_mask"].sum()) for b in rows) / sum(int(b["n_contexts"].sum()) for b in rows)
        results[name] = (time_steps(module, rows, cli.trainer.precision_plugin), tokens)
        print(name, results[name], flush=True)

    baseline = next(iter(results.values()))[0]
    own = results["cached teacher, long prompts"][0]
    print(
        f"\nRE training step, {args.config[-1].name}, {args.questions} questions x "
        f"{cli.datamodule.hparams['n_train_contexts']} contexts per setting, {torch.get_num_threads()} threads\n"
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
