"""Evaluation seconds per question with one generation per prompt, against every read generating its own.

A dev or test batch is read several times with the config's top k: the RE's top k, the retriever's
top k (the F1 baseline) and, for each depth d of `model.evaluation.eval_depths`, the RE's top k within the
retriever's first d. These often hold the same contexts, and `Evaluator.answer` generates
each prompt once per batch. This script times the module's evaluation step (`_evaluate`: the RE
over every window, then the generations) on the same test batches both ways, alternating which
runs first from batch to batch so that drifting load on a shared machine slows both alike, counts
the rows generated, and the answers that differ between the two (bf16 batches padded apart).
With --results and --data it reads a finished test (top k 1) instead: the questions whose RE puts
the retriever's first context first (one prompt for both answers), those among them whose two
answers differ, and the rows a question needs when each prompt is generated once.

    python benchmarks/eval_generation.py --ckpt outputs/squad_smollm2_teacher/checkpoints/best.ckpt --batches 10
    python benchmarks/eval_generation.py --results outputs/squad_smollm2_teacher/test_results.jsonl \\
        --data data/squad/test.jsonl
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from common import add_config_argument, config_args

from rerag.data.fid_format import read_fid
from rerag.evaluation import Evaluator
from rerag.fit_config import build_fit
from rerag.infer.compare import load_results


def shared_first_picks(results: list[dict], records: dict[str, dict], depth: int) -> dict[str, float]:
    """Over a finished test with top k 1 and `model.evaluation.eval_depths` [depth]: the questions, those whose RE's first
    pick is the retriever's first, those among them whose RE-order and retriever-order answers differ,
    and the rows generated per question, 3 read apart (the RE's pick, the retriever's, the RE's within
    the retriever's first `depth`) and at most this many once per prompt (a pick below `depth` counts
    its shallow pick as a row of its own)."""
    same = differ = within = 0
    for r in results:
        ids = [c["id"] for c in records[r["id"]]["ctxs"]]
        pick = r["contexts"][0]["id"]
        if pick == ids[0]:
            same += 1
            differ += r["answer"] != r["answer_retriever_order"]
        within += pick in ids[:depth]
    n = len(results)
    return {
        "questions": n,
        "RE's first = retriever's first": same,
        "of those, answers differ": differ,
        "rows per question, apart": 3.0,
        "rows per question, once per prompt (at most)": (n + (n - same) + (n - within)) / n,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_config_argument(p, "squad_smollm2_teacher.yaml")
    p.add_argument("--ckpt", type=Path, help="a checkpoint of the config's module (default: its untrained RE)")
    p.add_argument("--batches", type=int, default=10, help="test batches timed (the config's eval_batch_size each)")
    p.add_argument("--results", type=Path, help="a finished test's test_results.jsonl: count, do not time")
    p.add_argument("--data", type=Path, help="the data file that test read (with --results)")
    p.add_argument("--depth", type=int, default=4, help="its model.evaluation.eval_depths (with --results)")
    args = p.parse_args()
    if args.results:
        records = {r["id"]: r for r in read_fid(args.data)}
        counts = shared_first_picks(
            list(load_results(args.results, ("contexts", "answer", "answer_retriever_order")).values()),
            records,
            args.depth,
        )
        print("| " + " | ".join(counts) + " |\n" + "|---" * len(counts) + "|")
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in counts.values()) + " |")
        return
    cli = build_fit([*config_args(args.config), "--trainer.logger", "false"])
    module, data = cli.model, cli.datamodule
    if args.ckpt:
        module.load_state_dict(torch.load(args.ckpt, map_location="cpu", weights_only=False)["state_dict"])
    module.eval()
    module.log_dict = lambda *a, **k: None  # no trainer runs its loop here
    rows = {"shared": 0, "apart": 0}
    generate = module.generator.generate

    def counting(input_ids, *rest, **kwargs):
        rows[way] += len(input_ids)
        return generate(input_ids, *rest, **kwargs)

    module.generator.generate = counting

    evaluator = module.evaluator

    def each_read_its_own(batch, kept, weights, generated=None):
        return Evaluator.answer(evaluator, batch, kept, weights)  # no `generated` shared between reads

    seconds = {"shared": 0.0, "apart": 0.0}
    answers = {"shared": [], "apart": []}
    data.setup("test")
    loader = iter(data.test_dataloader())
    questions = 0
    with torch.inference_mode(), cli.trainer.precision_plugin.forward_context():
        for i in range(args.batches):
            batch = next(loader)
            questions += len(batch["ids"])
            for way in ("shared", "apart") if i % 2 == 0 else ("apart", "shared"):
                if way == "apart":
                    evaluator.answer = each_read_its_own
                else:
                    vars(evaluator).pop("answer", None)  # the class's answer
                module.results["test"] = []
                start = time.perf_counter()
                module._evaluate(batch, "test")
                seconds[way] += time.perf_counter() - start
                answers[way] += [(r["answer"], r["answer_retriever_order"]) for r in module.results["test"]]
    differ = sum(a != b for a, b in zip(answers["shared"], answers["apart"]))
    print(
        f"\nEvaluation step, {args.config[-1].name}, {questions} test questions ({args.batches} batches), "
        f"top k {module.evaluation.test_top_k}, eval_depths {module.evaluation.eval_depths}, "
        f"{torch.get_num_threads()} threads\n"
    )
    print("| generation | rows generated per question | s per question | vs apart |")
    print("|---|---|---|---|")
    for way, name in (("apart", "each read its own rows"), ("shared", "one per prompt per batch")):
        print(
            f"| {name} | {rows[way] / questions:.2f} | {seconds[way] / questions:.2f} | "
            f"{seconds['apart'] / seconds[way]:.2f}x |"
        )
    print(f"\nQuestions whose RE-order or retriever-order answer differs between the two: {differ} of {questions}")


if __name__ == "__main__":
    main()
