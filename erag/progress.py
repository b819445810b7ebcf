"""Progress of long loops, readable in a terminal and in a scheduler's log file.

On a terminal, `progress` is a tqdm bar. When stdout is not a terminal (a batch job writing to a
file), a bar's carriage-return redraws would pile up in the log, so it prints instead one
newline-terminated line every `interval` seconds (and a closing one for loops that took 5 s or
more), on rank 0 only:
`[rerank] 120/2400 questions (5.0%) | 3.20 questions/s | elapsed 0:37 | ETA 11:52`.
`interval` defaults to $RERAG_PROGRESS_INTERVAL, else 30 seconds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def default_interval() -> float:
    return float(os.environ.get("RERAG_PROGRESS_INTERVAL", 30))


def is_rank_zero() -> bool:
    """Rank 0 of a torchrun, SLURM or Lightning launch (or a single process)."""
    return all(int(os.environ.get(name, 0)) == 0 for name in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


def clock(seconds: float) -> str:
    """0:37, 11:52, 2:03:04."""
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}:{m:02d}:{s:02d}" if hours else f"{m}:{s:02d}"


def progress_line(
    name: str, done: int, total: int | None, elapsed: float, unit: str = "it", extra: dict[str, float] | None = None
) -> str:
    """One progress line: count (and share), rate, elapsed, ETA, then any `extra` values."""
    rate = done / elapsed if elapsed > 0 else 0.0
    parts = [
        f"[{name}] {done}/{total} {unit} ({100 * done / total:.1f}%)" if total else f"[{name}] {done} {unit}",
        f"{rate:.2f} {unit}/s",
        f"elapsed {clock(elapsed)}",
    ]
    if total and rate > 0:
        parts.append(f"ETA {clock((total - done) / rate)}")
    parts += [f"{k} {v:.4g}" for k, v in (extra or {}).items()]
    return " | ".join(parts)


def progress(
    items: Iterable[T],
    name: str,
    total: int | None = None,
    unit: str = "it",
    interval: float | None = None,
    stream=None,
) -> Iterator[T]:
    """`items`, reporting progress as a tqdm bar on a terminal and as timed lines otherwise."""
    stream = stream or sys.stdout
    total = total if total is not None else (len(items) if hasattr(items, "__len__") else None)
    if stream.isatty():
        from tqdm import tqdm

        yield from tqdm(items, desc=name, total=total, unit=unit)
        return
    interval = default_interval() if interval is None else interval
    loud = is_rank_zero()
    start = last = time.monotonic()
    done, printed = 0, False
    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if loud and now - last >= interval:
            print(progress_line(name, done, total, now - start, unit), file=stream, flush=True)
            last, printed = now, True
    elapsed = time.monotonic() - start
    if loud and (printed or elapsed >= min(interval, 5.0)):  # a closing line for loops worth reporting
        print(progress_line(name, done, total, elapsed, unit), file=stream, flush=True)
