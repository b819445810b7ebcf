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

`--cache-build` times instead the teacher cache's build (`rerag.teacher_cache.build_in_shares`) of the
config's first `--triples` training triples with 1 and then 2 processes (gloo on the CPU, one thread per
process in both runs: a stand-in for GPUs, each process scoring its share), from the start, every
process holding the teacher, to every process holding the merged cache and rank zero having written it;
it prints each process's share of the triples and prompt tokens, the wall times and their ratio, and
whether the 2-process cache equals the 1-process one entry for entry.

    python benchmarks/re_teacher_speed.py --cache-build --triples 2000
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
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

from erag.lm import encode_answers, encode_prompts
from rerag.teacher_cache import (
    MAX_QUESTION_TOKENS,
    CacheShares,
    TeacherScores,
    build_in_shares,
    build_teacher_scores,
    row_batches,
    scoring_work,
    share_of,
)


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


def share_tokens(teacher, rows: dict, max_target_tokens: int, batch_size: int, share: tuple[int, int]) -> int:
    """The prompt and target tokens the teacher reads in `share` = (rank, processes) of `rows`' batches."""
    tokens = 0
    for batch in share_of(row_batches(rows, batch_size), *share):
        prompts = encode_prompts(teacher.tokenizer, [p for _, (p, _, _) in batch], teacher.max_length)
        targets = encode_answers(teacher.tokenizer, [t for _, (_, t, _) in batch], max_target_tokens)
        tokens += int(prompts["attention_mask"].sum()) + int((targets != -100).sum())
    return tokens


def build_cache(rank: int, processes: int, configs: list[Path], n_triples: int, folder: Path) -> None:
    """One process of a `processes`-process cache build (spawned): gloo, one thread; it times its part
    from the first barrier (every process holding the teacher and the triples) to the last (every one
    holding the merged cache) and writes its record to `folder/rank<r>.json`."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=processes)
    cli = build([*config_args(configs), "--trainer.logger", "false"])
    teacher, _ = cli.model.frozen_teacher()
    question_template, batch_size = cli.model.teacher.question_template, cli.model.evaluation.score_batch_size
    cli.datamodule.setup("fit")
    triples = list(itertools.islice(cli.datamodule.teacher_triples(1), n_triples))
    shares, final = CacheShares(folder, "cache", rank, processes, batch_size), folder / "cache.pt"
    dist.barrier()
    start = time.perf_counter()
    scores = build_in_shares(teacher, triples, shares, final, question_template=question_template, timeout=3600)
    if rank == 0:
        scores.save(final)
    dist.barrier()
    seconds = time.perf_counter() - start
    work = scoring_work(teacher, triples, question_template)
    share = (rank, processes)
    own = sum(len(b) for b in share_of(row_batches(work.answers, batch_size), *share))
    tokens = share_tokens(teacher, work.answers, teacher.max_answer_length, batch_size, share)
    tokens += share_tokens(teacher, work.questions, MAX_QUESTION_TOKENS, batch_size, share)
    record = {"seconds": seconds, "triples": own, "all_triples": len(work.answers), "tokens": tokens}
    (folder / f"rank{rank}.json").write_text(json.dumps(record))
    dist.barrier()
    if rank == 0:
        shares.remove()
    dist.destroy_process_group()


def cache_build(configs: list[Path], n_triples: int) -> None:
    """The teacher cache's build with 1 and 2 processes on the same triples, and its table."""
    os.environ["OMP_NUM_THREADS"] = "1"  # the spawned processes' one thread
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for processes in (1, 2):
            folder = Path(tmp) / f"{processes}"
            folder.mkdir()
            mp.spawn(build_cache, args=(processes, configs, n_triples, folder), nprocs=processes)
            records = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(processes)]
            runs[processes] = (records, TeacherScores.load(folder / "cache.pt"))
    (one, single), merged = runs[1], runs[2][1]
    equal = merged.scores == single.scores and merged.question_scores == single.question_scores
    differing = sum(merged.scores.get(k) != f for k, f in single.scores.items())
    wall = {n: max(r["seconds"] for r in records) for n, (records, _) in runs.items()}
    print(
        f"\nteacher cache build, {configs[-1].name}, the first {n_triples} training triples "
        f"({one[0]['all_triples']} distinct), gloo on the CPU, 1 thread per process (a stand-in for GPUs)\n"
    )
    print("| processes | rank | triples | share of triples | prompt + target tokens | share of tokens | wall s |")
    print("|---|---|---|---|---|---|---|")
    for n, (records, _) in runs.items():
        all_tokens = sum(r["tokens"] for r in records)
        for rank, r in enumerate(records):
            print(
                f"| {n} | {rank} | {r['triples']} | {r['triples'] / r['all_triples']:.3f} | {r['tokens']} | "
                f"{r['tokens'] / all_tokens:.3f} | {r['seconds']:.2f} |"
            )
    print(f"\n2 processes' wall time / 1 process's: {wall[2] / wall[1]:.2f}")
    print(f"2-process cache == 1-process cache, entry for entry: {equal} ({len(single)} entries, {differing} differ)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_config_argument(p, "squad_smollm2_teacher.yaml")
    p.add_argument("--questions", type=int, default=6, help="timed training questions per setting")
    p.add_argument("--cache-build", action="store_true", help="time the teacher cache's build, 1 and 2 processes")
    p.add_argument("--triples", type=int, default=2000, help="--cache-build: the training triples scored")
    args = p.parse_args()
    if args.cache_build:
        cache_build(args.config, args.triples)
        return
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
