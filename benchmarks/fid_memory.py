"""Converting a large FiD file for training: `load_fid_dataset` over a generated file of N questions x K
passages (a JSON list, indented or not, and JSONL, plain or gzipped) into a fresh Arrow cache, then
`RERAGDataModule.setup("fit")` and its first training batch, each in a fresh process so its peak
resident memory (ru_maxrss) is its own. A file is decoded as a stream (`rerag.data.fid_format`) and
the cache written from that stream, so the peak should not grow with the file.

    python benchmarks/fid_memory.py --questions 5000,20000 --passages 100 --out /tmp/fid_memory

`--pythonpath DIR` converts with the rerag found in DIR (e.g. a git worktree of an earlier commit), to
compare against it in the same run; `--forms` picks the file forms (default: all four).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

CONVERT = """
import resource, sys, time
from pathlib import Path
from rerag.data.datamodule import RERAGDataModule
from rerag.data.dataset import load_fid_dataset
from rerag.inputs import InputSpec
import rerag
t0 = time.perf_counter()
n = len(load_fid_dataset(sys.argv[1]))
t1 = time.perf_counter()
tokenizer = str(Path(rerag.__file__).parent / "assets" / "demo_tokenizer")
data = RERAGDataModule(train_file=sys.argv[1], inputs=InputSpec(re_tokenizer=tokenizer, generator_tokenizer=tokenizer))
data.setup("fit")
next(iter(data.train_dataloader()))
t2 = time.perf_counter()
print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, t1 - t0, t2 - t1)
"""
BASELINE = "import resource, rerag.data.dataset; print(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, 0, 0)"


def record(i: int, passages: int, rng: random.Random) -> dict:
    words = [f"w{rng.randrange(5000)}" for _ in range(120)]
    ctxs = [
        {"id": f"{i}.{j}", "title": f"t{j}", "text": " ".join(rng.sample(words, 100)), "score": 1.0 / (j + 1)}
        for j in range(passages)
    ]
    return {"id": str(i), "question": f"question {i}?", "answers": [words[0]], "ctxs": ctxs}


def write_files(out: Path, questions: int, passages: int) -> dict[str, Path]:
    """The same records as a JSON list (one line, and indented), JSONL and gzipped JSONL."""
    out = out / f"{questions}x{passages}"
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "JSON list": out / "list.json",
        "JSON list, indented": out / "indented.json",
        "JSONL": out / "rows.jsonl",
        "JSONL.gz": out / "rows.jsonl.gz",
    }
    if all(p.exists() for p in files.values()):
        return files
    rng = random.Random(0)
    with (
        open(files["JSON list"], "w") as flat,
        open(files["JSON list, indented"], "w") as indented,
        open(files["JSONL"], "w") as rows,
        gzip.open(files["JSONL.gz"], "wt") as gz,
    ):
        flat.write("[")
        indented.write("[\n")
        for i in range(questions):
            r = record(i, passages, rng)
            line = json.dumps(r)
            flat.write(("," if i else "") + line)
            indented.write((",\n" if i else "") + json.dumps(r, indent=1))
            rows.write(line + "\n")
            gz.write(line + "\n")
        flat.write("]")
        indented.write("\n]\n")
    return files


def measure(code: str, path: Path | None, pythonpath: str | None, scratch: Path) -> list[str]:
    """Records, peak RSS in MB, conversion seconds and seconds to the first batch of `code` in a fresh
    process (a fresh datasets cache in `scratch`, removed after), or the error's last line."""
    env = dict(os.environ, HF_DATASETS_CACHE=str(scratch))  # a cold cache, which setup then reads
    if pythonpath:
        env |= {"PYTHONPATH": pythonpath, "PYTHONSAFEPATH": "1"}
    argv = [sys.executable, "-c", code] + ([str(path)] if path else [])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode:
        return ["fails: " + done.stderr.strip().splitlines()[-1][:80], "", "", ""]
    records, kb, convert, first = done.stdout.split()[-4:]
    return [records, f"{int(kb) / 1024:,.0f}", f"{float(convert):.1f}", f"{float(first):.1f}"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", default="3200", help="comma-separated sizes, e.g. 5000,20000")
    p.add_argument("--passages", type=int, default=100)
    p.add_argument("--forms", default="JSON list,JSON list; indented,JSONL,JSONL.gz", help="';' stands for ','")
    p.add_argument("--out", type=Path, default=Path("/tmp/fid_memory"))
    p.add_argument("--pythonpath", action="append", default=[], help="also convert with the rerag in this folder")
    args = p.parse_args()
    forms = [f.strip().replace(";", ",") for f in args.forms.split(",")]
    readers = [("this rerag", None)] + [(f"rerag in {d}", d) for d in args.pythonpath]
    for label, where in readers:
        base = measure(BASELINE, None, where, args.out / "scratch")[1]
        print(f"{label}: importing the reader alone peaks at {base} MB")
    print(f"\n{args.passages} passages per question")
    print("| questions | file | MB | rerag | peak RSS MB | conversion s | records/s | setup + first batch s |")
    print("|---|---|---|---|---|---|---|---|")
    for questions in map(int, args.questions.split(",")):
        files = write_files(args.out, questions, args.passages)
        for name in forms:
            path = files[name]
            size = path.stat().st_size / 2**20
            for label, where in readers:
                n, peak, convert, first = measure(CONVERT, path, where, args.out / "scratch")
                rate = f"{int(n) / float(convert):,.0f}" if convert else ""
                row = [f"{questions:,}", name, f"{size:,.0f}", label, peak, convert, rate, first]
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
