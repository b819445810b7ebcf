"""What does running the rows' shared prompt prefix once save, on a real LM, outside training?

A decoder-only model's rows that begin alike (the chat template and the question for the RE's rows
of one question; the template and the instruction for the generator's) need that prefix run once,
for one row (`erag.lm.decoder_states`). Builds a frozen-teacher fit config's module
(`configs/squad_smollm2_teacher.yaml`, float32 unless `--bf16`) and times, every row whole (the
models' `share_prefix = False`) and then with the shared prefix, on the same questions in one run:

1. the RE scoring the dev questions as validation and test do (`RERAGModule.relevance_scores`:
   BM25's top 20, each passage by its windows of the config's `eval_context_words`);
2. the teacher's F_ij over the training questions' contexts, as the teacher cache builds them
   (`rerag.teacher_cache.build_teacher_scores`: rows of many questions, sorted by prompt length).

Printed per part: rows, seconds both ways, the speed-up and the largest difference between the two
ways' scores (float rounding only: the two compute the same function).

    python benchmarks/shared_prefix.py --dev-questions 4 --train-questions 16
    python benchmarks/shared_prefix.py --device cuda --bf16 --dev-questions 40 --train-questions 64

On a GPU the models share no prefix unless told to (`erag.lm.shares_prefix`): the second line says
whether they should.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from lightning.pytorch.utilities import move_data_to_device
from re_teacher_speed import BF16, FLOAT32, batches, build

from rerag.teacher_cache import build_teacher_scores


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=Path("configs/squad_smollm2_teacher.yaml"))
    p.add_argument("--dev-questions", type=int, default=4, help="dev questions the RE scores")
    p.add_argument("--train-questions", type=int, default=16, help="training questions the teacher scores")
    p.add_argument("--bf16", action="store_true", help="bf16 weights under bf16-mixed autocast (default float32)")
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    args = p.parse_args()
    accelerator = ["--trainer.accelerator", "gpu" if args.device.startswith("cuda") else "cpu"]
    cli = build(
        ["--config", str(args.config), "--trainer.logger", "false", *accelerator, *(BF16 if args.bf16 else FLOAT32)]
    )
    module, data = cli.model.to(args.device), cli.datamodule
    module.eval()
    data.setup("validate")
    loader = iter(data.val_dataloader())
    dev = []
    while sum(len(b["ids"]) for b in dev) < args.dev_questions:
        dev.append(move_data_to_device(next(loader), module.device))
    teacher, _ = module.teacher_generator()
    train = batches(data, args.train_questions)
    triples = [(q, t, c) for b in train for q, t, cs in zip(b["questions"], b["targets"], b["contexts"]) for c in cs]

    def re_scores():
        return torch.cat([module.relevance_scores(b) for b in dev])

    def teacher_scores():
        scores = build_teacher_scores(teacher, triples)
        return torch.tensor([scores.lookup([q], [t], [[c]]).item() for q, t, c in triples])

    parts = {
        f"RE, dev scoring ({sum(len(b['ids']) for b in dev)} questions, {sum(len(b['re']['input_ids']) for b in dev)} rows)": (
            module.estimator,
            re_scores,
        ),
        f"teacher F_ij, cache build ({args.train_questions} questions, {len(triples)} rows)": (teacher, teacher_scores),
    }
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
    print(f"\nShared prompt prefix, {args.config.name}, {precision}, {where}\n")
    print("| part | s, every row whole | s, shared prefix once | speed-up | largest score difference |")
    print("|---|---|---|---|---|")
    for name, (whole, shared, diff) in results.items():
        print(f"| {name} | {whole:.1f} | {shared:.1f} | {whole / shared:.2f}x | {diff:.1e} |")


if __name__ == "__main__":
    main()
