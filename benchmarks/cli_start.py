"""How long does `rerag --help` take to print? Wall time of a fresh process, best of N, for this
checkout and optionally for other checkouts of the project (e.g. an older commit in a git worktree),
each run as `python -c "from rerag.cli import main; main(['--help'])"` with that checkout first on
the path, so the same interpreter and installed libraries serve every row.

    git worktree add /tmp/rerag-before <commit>
    python benchmarks/cli_start.py --checkouts /tmp/rerag-before . --repeats 3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

CODE = (
    "import sys; sys.path.insert(0, {root!r}); from rerag.cli import main; main(['--help']); "
    "import rerag; print(rerag.__file__)"
)


def best_time(root: Path, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CODE.format(root=str(root.resolve()))],
            check=True,
            capture_output=True,
            text=True,
            cwd=root,
        )
        times.append(time.perf_counter() - start)
        origin = Path(done.stdout.strip().splitlines()[-1]).resolve()
        if root.resolve() not in origin.parents:
            raise SystemExit(f"{root}: rerag was imported from {origin}, not from this checkout")
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkouts", type=Path, nargs="+", default=[Path(".")], help="project checkouts to time")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    rows = [(root, best_time(root, args.repeats)) for root in args.checkouts]
    print(f"\n`rerag --help`, wall seconds of a fresh process, best of {args.repeats}\n")
    print("| checkout | seconds |\n|---|---|")
    for root, seconds in rows:
        print(f"| {root} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
