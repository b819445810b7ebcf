"""Does the embedded default learn, on its own world and on one the project did not generate?

Runs `rerag fit --config configs/demo.yaml` unchanged on the synthetic world it ships with, and
the same config pointed at a world the project's generator did not make
(`benchmarks/foreign_world.py`: ships, harbours, captains; other names, relations and templates),
then prints, per world, the wall time and the test split's RE Recall@1 against BM25's (the
retriever order) and RE-RAG's exact match against the retriever-order baseline's. Each run writes
its checkpoints, `test_metrics.json` and `learning_curve.png` under `--out/<world>`.

    OMP_NUM_THREADS=2 python benchmarks/demo_learning.py             # both worlds, one after the other
    python benchmarks/demo_learning.py --worlds foreign --extra --trainer.max_steps=300   # a quick look
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def world_config(world: str, out: Path, data_root: Path) -> list[str]:
    """`rerag fit` arguments: configs/demo.yaml with its outputs moved under `out` (a copy written
    there), pointed at `world`'s files."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / "config.yaml"
    config.write_text((ROOT / "configs" / "demo.yaml").read_text().replace("outputs/demo", str(out)))
    args = ["--config", str(config)]
    if world == "demo":
        return args + [f"--data.data_dir={data_root / 'demo'}"]
    folder = data_root / "foreign"
    if not (folder / "test.jsonl").is_file():
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "foreign_world.py"), "--out", str(folder)], check=True
        )
    return args + [
        "--data.demo=null",
        f"--data.train_file={folder / 'train.jsonl'}",
        f"--data.val_file={folder / 'dev.jsonl'}",
        f"--data.test_file={folder / 'test.jsonl'}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="demo,foreign", help="comma-separated: demo, foreign")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "demo_learning")
    parser.add_argument("--data-root", type=Path, default=ROOT / "data", help="where both worlds' files live")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `rerag fit` arguments")
    args = parser.parse_args()
    rows = []
    for world in args.worlds.split(","):
        out = args.out / world
        command = [
            sys.executable,
            "-m",
            "rerag",
            "fit",
            *world_config(world, out, args.data_root),
            "--trainer.enable_progress_bar=false",
            *args.extra,
        ]
        start = time.time()
        subprocess.run(command, check=True, cwd=ROOT)
        metrics = json.loads((out / "test_metrics.json").read_text())
        rows.append((world, (time.time() - start) / 60, metrics))
    print("\n| world | minutes | steps | RE Recall@1 | BM25 Recall@1 | RE-RAG EM | retriever-order EM |")
    print("|---|---|---|---|---|---|---|")
    for world, minutes, m in rows:
        print(
            f"| {world} | {minutes:.1f} | {m['global_step']} | {m['test/re_recall@1']:.3f} | "
            f"{m['test/retriever_recall@1']:.3f} | {m['test/em']:.3f} | {m['test/em_retriever_order']:.3f} |"
        )


if __name__ == "__main__":
    main()
