"""Peak memory of reading a large FiD file: `read_fid` over a generated file of N questions x K
passages (a JSON list, indented or not, and JSONL, plain or gzipped), each read in a fresh process so
its peak resident memory (ru_maxrss) is its own. A file is decoded as a stream
(`rerag.data.fid_format`), so the peak should not grow with the file.

    python benchmarks/fid_memory.py --questions 3200 --passages 100 --out /tmp/fid_memory

`--pythonpath DIR` reads with the rerag found in DIR (e.g. a git worktree of an earlier commit), to
compare against it in the same run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

READ = """
import resource, sys
from rerag.data.fid_format import read_fid
n = sum(1 for _ in read_fid(sys.argv[1]))
print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
BASELINE = "import resource, rerag.data.fid_format; print(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


def record(i: int, passages: int, rng: random.Random) -> dict:
    words = [f"w{rng.randrange(5000)}" for _ in range(120)]
    ctxs = [
        {"id": f"{i}.{j}", "title": f"t{j}", "text": " ".join(rng.sample(words, 100)), "score": 1.0 / (j + 1)}
        for j in range(passages)
    ]
    return {"id": str(i), "question": f"question {i}?", "answers": [words[0]], "ctxs": ctxs}


def write_files(out: Path, questions: int, passages: int) -> dict[str, Path]:
    """The same records as a JSON list (one line, and indented), JSONL and gzipped JSONL."""
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


def peak_mb(code: str, path: Path | None, pythonpath: str | None) -> tuple[str, str]:
    """Records read and peak RSS in MB of `code` in a fresh process, or the error's last line."""
    env = dict(os.environ)
    if pythonpath:
        env |= {"PYTHONPATH": pythonpath, "PYTHONSAFEPATH": "1"}
    argv = [sys.executable, "-c", code] + ([str(path)] if path else [])
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        return "fails: " + done.stderr.strip().splitlines()[-1][:80], ""
    records, kb = done.stdout.split()
    return records, f"{int(kb) / 1024:,.0f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", type=int, default=3200)
    p.add_argument("--passages", type=int, default=100)
    p.add_argument("--out", type=Path, default=Path("/tmp/fid_memory"))
    p.add_argument("--pythonpath", action="append", default=[], help="also read with the rerag in this folder")
    args = p.parse_args()
    files = write_files(args.out, args.questions, args.passages)
    readers = [("this rerag", None)] + [(f"rerag in {d}", d) for d in args.pythonpath]
    print(f"{args.questions} questions x {args.passages} passages")
    print("| file | MB | reader | records | peak RSS MB | import alone MB |")
    print("|---|---|---|---|---|---|")
    for name, path in files.items():
        for label, where in readers:
            n, peak = peak_mb(READ, path, where)
            _, base = peak_mb(BASELINE, None, where)
            size = path.stat().st_size / 2**20
            print(f"| {name} | {size:,.0f} | {label} | {n} | {peak} | {base} |", flush=True)


if __name__ == "__main__":
    main()
