"""What does running the rows' shared prompt prefix once save, on a real LM, outside training?

A decoder-only model's rows that begin alike (the chat template and the question for the RE's rows
of one question; the template, the instruction and the passage for the teacher's rows of one
context) need that prefix run once, for one row (`erag.lm.decoder_states`). Builds a frozen-teacher
fit config's module (`configs/squad_smollm2_teacher.yaml`, float32 unless `--bf16`) and times, every
row whole (the models' `share_prefix = False`) and then with the shared prefix, on the same rows in
one run:

1. the RE scoring the dev questions as validation and test do (`RERAGModule.relevance_scores`:
   BM25's top 20, each passage by its windows of the config's `eval_context_words`);
2. the teacher cache (`rerag.teacher_cache.build_teacher_scores`, both its parts with
   `--question-template`) over every training row of `--cache-passages` passages drawn from the
   ones training may show (each with all the questions that retrieved it, as in the whole cache),
   in batches as the cache used to form them (rows of many contexts, sorted by prompt length) and
   as it forms them now (one context's rows per batch, `rerag.teacher_cache.score_rows`).

Printed per row: rows, seconds both ways, the speed-up and the largest difference between the two
ways' scores (float rounding only: the two compute the same function); then the teacher cache's
speed-up now against before, both with the shared prefix (as it runs on a CPU).

    python benchmarks/shared_prefix.py --dev-questions 4 --cache-passages 8
    python benchmarks/shared_prefix.py --bf16 --dev-questions 0 --cache-passages 8 \\
        --question-template $'Passage: {text}\\nWrite a question that this passage answers.'
    python benchmarks/shared_prefix.py --device cuda --bf16 --dev-questions 40 --cache-passages 32

On a GPU the models share no prefix unless told to (`erag.lm.shares_prefix`): the last line says
whether they should.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import torch
from lightning.pytorch.utilities import move_data_to_device
from re_teacher_speed import BF16, FLOAT32, build

from rerag.inputs import fill
from rerag.teacher_cache import MAX_QUESTION_TOKENS, build_teacher_scores, pair_key, score_rows


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


def cache_rows(triples: list[tuple[str, str, dict]], passages: int) -> list[tuple[str, str, dict]]:
    """Every row of `passages` contexts drawn (seed 0) from those in `triples`."""
    texts = sorted({c["text"] for _, _, c in triples})
    chosen = set(random.Random(0).sample(texts, min(passages, len(texts))))
    return [t for t in triples if t[2]["text"] in chosen]


def length_sorted_cache(teacher, triples, batch_size: int, question_template: str | None) -> dict[str, float]:
    """F of every row as the cache computed it before its batches held one context: `score_rows`
    with every row in one group, so batches mix contexts, sorted by prompt length alone."""
    answers = {pair_key(q, a, c): (fill(teacher.template, q, c), a, "") for q, a, c in triples}
    f = score_rows(teacher, answers, teacher.max_answer_length, batch_size, "teacher cache, length-sorted")
    if question_template is not None:
        questions = {pair_key(q, "", c): (fill(question_template, "", c), q, "") for q, _, c in triples}
        question_ll = score_rows(teacher, questions, MAX_QUESTION_TOKENS, batch_size, "questions, length-sorted")
        f = {pair_key(q, a, c): f[pair_key(q, a, c)] + question_ll[pair_key(q, "", c)] for q, a, c in triples}
    return f


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=Path("configs/squad_smollm2_teacher.yaml"))
    p.add_argument("--dev-questions", type=int, default=4, help="dev questions the RE scores (0: skip the part)")
    p.add_argument("--cache-passages", type=int, default=8, help="passages whose training rows the teacher scores")
    p.add_argument(
        "--question-template", default=None, help="the cache's question part too (model.teacher_question_template)"
    )
    p.add_argument("--bf16", action="store_true", help="bf16 weights under bf16-mixed autocast (default float32)")
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    args = p.parse_args()
    accelerator = ["--trainer.accelerator", "gpu" if args.device.startswith("cuda") else "cpu"]
    cli = build(
        ["--config", str(args.config), "--trainer.logger", "false", *accelerator, *(BF16 if args.bf16 else FLOAT32)]
    )
    module, data = cli.model.to(args.device), cli.datamodule
    module.eval()
    teacher, _ = module.teacher_generator()
    batch_size = module.hparams.score_batch_size
    data.setup("fit")
    triples = cache_rows(list(data.teacher_triples()), args.cache_passages)
    keys = [pair_key(*t) for t in triples]
    template = args.question_template

    def as_tensor(f: dict[str, float]) -> torch.Tensor:
        return torch.tensor([f[k] for k in keys])

    parts = {}
    if args.dev_questions:
        data.setup("validate")
        loader = iter(data.val_dataloader())
        dev = []
        while sum(len(b["ids"]) for b in dev) < args.dev_questions:
            dev.append(move_data_to_device(next(loader), module.device))
        rows = sum(len(b["re"]["input_ids"]) for b in dev)
        name = f"RE, dev scoring ({sum(len(b['ids']) for b in dev)} questions, {rows} rows)"
        parts[name] = (module.estimator, lambda: torch.cat([module.relevance_scores(b) for b in dev]))
    what = f"teacher cache, {args.cache_passages} passages ({len(set(keys))} F{', both parts' if template else ''})"
    parts[f"{what}, length-sorted batches (before)"] = (
        teacher,
        lambda: as_tensor(length_sorted_cache(teacher, triples, batch_size, template)),
    )
    parts[f"{what}, one context per batch (now)"] = (
        teacher,
        lambda: as_tensor(build_teacher_scores(teacher, triples, batch_size, question_template=template).scores),
    )
    results = {}
    with torch.no_grad(), cli.trainer.precision_plugin.forward_context():
        for name, (model, fn) in parts.items():
            fn()  # warm-up
            model.share_prefix = False
            whole, before = timed(fn)
            model.share_prefix = True
            shared, after = timed(fn)
            results[name] = (whole, shared, float((after - before).abs().max()))
            print(name, results[name], flush=True)

    precision = "bf16-mixed" if args.bf16 else "float32"
    where = torch.cuda.get_device_name() if module.device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"\nShared prompt prefix, {args.config.name}, {precision}, {where}, batches of {batch_size}\n")
    print("| part | s, every row whole | s, shared prefix once | speed-up | largest score difference |")
    print("|---|---|---|---|---|")
    for name, (whole, shared, diff) in results.items():
        print(f"| {name} | {whole:.1f} | {shared:.1f} | {whole / shared:.2f}x | {diff:.1e} |")
    teacher_rows = [r for n, r in results.items() if n.startswith("teacher")]
    if len(teacher_rows) == 2:  # the cache as it ran on a CPU (shared prefix, length-sorted) against now
        print(f"\nTeacher cache, now against before (both shared): {teacher_rows[0][1] / teacher_rows[1][1]:.2f}x")


if __name__ == "__main__":
    main()
