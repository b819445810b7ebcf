"""What does folding the RE's LoRA adapter into a copy of the base save when scoring on a CPU?

While an evaluation epoch runs, the RE's weights are fixed, so `RERAGModule` scores with
`RelevanceEstimator.for_scoring`: on a CPU with float32 weights, a copy whose adapter is merged
(`rerag.models.lora.merged`), which runs no low-rank matmuls. Builds a fit config's module
(`configs/squad_smollm2_teacher.yaml`, float32), gives its adapter random low-rank updates (seed 0;
an untrained adapter is zero) or loads `--ckpt`'s weights, and times `RERAGModule.relevance_scores`
over the same dev questions both ways, in alternating rounds, after one warm-up each. Printed:
seconds per question both ways (the best round), the speed-up, the copy's own cost and the
largest difference between the two ways' s (float32 rounding: the same function).

    python benchmarks/merged_scoring.py --dev-questions 4 --rounds 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from lightning.pytorch.utilities import move_data_to_device
from re_teacher_speed import FLOAT32, build


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=Path("configs/squad_smollm2_teacher.yaml"))
    p.add_argument("--ckpt", type=Path, default=None, help="a checkpoint of the config (default: random adapter)")
    p.add_argument("--dev-questions", type=int, default=4, help="dev questions the RE scores")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds of each way, alternating")
    args = p.parse_args()
    cli = build(["--config", str(args.config), "--trainer.logger", "false", *FLOAT32])
    module, data = cli.model, cli.datamodule
    if args.ckpt is not None:
        module.load_state_dict(torch.load(args.ckpt, map_location="cpu", weights_only=False)["state_dict"])
    else:
        generator = torch.Generator().manual_seed(0)
        for name, param in module.estimator.model.named_parameters():
            if "lora_B" in name:
                param.data.normal_(0.0, 0.02, generator=generator)
    module.eval()
    data.setup("validate")
    loader = iter(data.val_dataloader())
    dev = []
    while sum(len(b["ids"]) for b in dev) < args.dev_questions:
        dev.append(move_data_to_device(next(loader), module.device))
    questions = sum(len(b["ids"]) for b in dev)
    rows = sum(len(b["re"]["input_ids"]) for b in dev)

    def score() -> tuple[float, torch.Tensor]:
        start = time.perf_counter()
        s = torch.cat([module.relevance_scores(b) for b in dev])
        return time.perf_counter() - start, s

    with torch.no_grad():
        start = time.perf_counter()
        merged = module.estimator.for_scoring()
        copy_seconds = time.perf_counter() - start
        assert merged is not module.estimator, "for_scoring did not merge (weights not float32 on a CPU?)"
        ways = {"adapter live": None, "adapter merged": merged}
        times, s = {name: [] for name in ways}, {}
        for round_ in range(args.rounds + 1):  # round 0 warms up; the order alternates
            for name in list(ways)[:: 1 if round_ % 2 else -1]:
                module.__dict__["scoring_estimator"] = ways[name]
                seconds, s[name] = score()
                if round_:
                    times[name].append(seconds / questions)
                    print(f"round {round_}: {name} {times[name][-1]:.2f} s per question", flush=True)
    diff = float((s["adapter live"] - s["adapter merged"]).abs().max())
    live, fused = min(times["adapter live"]), min(times["adapter merged"])
    print(
        f"\nRE scoring, {args.config.name}, float32, CPU, {torch.get_num_threads()} threads: {questions} dev "
        f"questions, {rows} rows, batches of {module.hparams.score_batch_size}; best of {args.rounds} rounds\n"
    )
    print("| RE scoring | s per question | speed-up |")
    print("|---|---|---|")
    print(f"| the adapter live (PEFT's LoRA layers) | {live:.2f} | 1.00x |")
    print(f"| the adapter merged into a copy of the base | {fused:.2f} | {live / fused:.2f}x |")
    print(f"\nThe copy: {copy_seconds:.1f} s once per evaluation epoch; largest difference in s: {diff:.1e}")


if __name__ == "__main__":
    main()
