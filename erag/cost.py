"""Runtime and peak memory of eRAG against end-to-end evaluation (the eRAG paper's §3.2, Table 2).

The reader is a randomly initialized T5 with T5-small's shape (the paper's LLM), greedy decoding,
over synthetic queries with k documents of w words each. End-to-end evaluation reads each query's
whole list, either concatenated into one input (IPA) or Fusion-in-Decoder (FiD, the paper's
setting); eRAG reads each (query, document) pair alone.

Configurations (Table 2):
- runtime: both sides hold the same number of documents per batch: B queries x k documents for
  end-to-end, B*k (query, document) pairs for eRAG;
- memory, query-level: end-to-end batch 1 query, eRAG batch k pairs (one query's documents);
- memory, document-level: end-to-end batch 1 query, eRAG batch 1 pair.

Memory on CPU is the growth of the process's resident set size during the evaluation: the kernel's
peak RSS (``VmHWM`` in ``/proc/self/status``), reset to the current RSS through
``/proc/self/clear_refs`` just before evaluating (after ``malloc_trim`` hands freed heap pages back,
so that memory cached by the allocator is counted), minus that RSS. Each configuration runs in a
fresh process after model build and a warm-up call. It counts everything the process touches
(activations, allocator caches, Python objects), not only tensors; tracemalloc would miss torch's
allocations. Every output is exactly ``--max-new-tokens`` long (``min_new_tokens``), so that a
random model's early end-of-sequence does not favour either side.

`cost_table(argv)` returns the table; `benchmarks/erag_cost.py` prints it, and `rerag reproduce erag
table2` reads it:

    python benchmarks/erag_cost.py            # T5-small shape, 8 queries x 50 documents x 100 words
    python benchmarks/erag_cost.py --d-model 64 --layers 2 --queries 2 --docs 10   # quick look
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import random
import subprocess
import sys
import time

MODES = ("e2e-concat", "e2e-fid", "erag")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=8, help="queries for the runtime runs")
    parser.add_argument("--memory-queries", type=int, default=2, help="queries for the memory runs")
    parser.add_argument("--docs", type=int, default=50, help="documents per query (k)")
    parser.add_argument("--doc-words", type=int, default=100, help="words per document")
    parser.add_argument("--batch-queries", type=int, default=2, help="B of the runtime configuration")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--d-ff", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=6, help="encoder and decoder layers each")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=1, help="runtime: best of this many runs per cell")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "BATCH", "QUERIES"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def build_reader(args, fusion: str):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    from erag import HFReader

    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    words = [f"w{i}" for i in range(args.vocab)] + "Answer the question using context Question :".split()
    special = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}
    trainer = trainers.WordLevelTrainer(special_tokens=list(special.values()))
    backend.train_from_iterator([" ".join(words)], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **special)
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=args.d_model,
        d_ff=args.d_ff,
        d_kv=args.d_model // args.heads,
        num_layers=args.layers,
        num_heads=args.heads,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    model = T5ForConditionalGeneration(config).eval()
    return HFReader(
        model,
        tokenizer,
        max_new_tokens=args.max_new_tokens,
        fusion=fusion,
        generate_kwargs={"min_new_tokens": args.max_new_tokens},
    )


def synthetic_data(args, queries: int):
    rng = random.Random(0)
    word = lambda: f"w{rng.randrange(args.vocab)}"  # noqa: E731
    retrieval = {
        f"q{i}": {
            "question": " ".join(word() for _ in range(10)),
            "documents": [" ".join(word() for _ in range(args.doc_words)) for _ in range(args.docs)],
        }
        for i in range(queries)
    }
    return retrieval, {qid: [word()] for qid in retrieval}


def status_mib(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak resident) of this process, in MiB."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024  # kB


def reset_peak_rss() -> None:
    """Return freed heap pages to the OS (glibc), then reset VmHWM to the current RSS."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def child(args) -> None:
    """One configuration in this fresh process; prints a JSON line."""
    import torch

    from erag import annotate, end_to_end_scores

    mode, batch, queries = args.child[0], int(args.child[1]), int(args.child[2])
    torch.set_num_threads(args.threads)
    reader = build_reader(args, fusion="fid" if mode == "e2e-fid" else "concat")
    retrieval, expected = synthetic_data(args, queries)

    def run(data, gold, size):
        evaluation = annotate if mode == "erag" else end_to_end_scores
        return evaluation(data, gold, reader, "em", batch_size=size)

    with torch.inference_mode():
        warm = {"w": {"question": "w1", "documents": ["w2"]}}
        run(warm, {"w": ["w3"]}, 1)
        reset_peak_rss()
        before = status_mib("VmRSS")
        start, start_cpu = time.perf_counter(), time.process_time()
        run(retrieval, expected, batch)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
        peak = status_mib("VmHWM")
    params = sum(p.numel() for p in reader.model.parameters())
    result = {"seconds": seconds, "cpu_seconds": cpu_seconds, "memory_mib": peak - before, "params": params}
    print(json.dumps(result))


def measure(argv: list[str], mode: str, batch: int, queries: int) -> dict:
    """One configuration in a fresh process (`python -m erag.cost ARGV --child ...`), so that its
    peak resident memory is its own."""
    command = [sys.executable, "-m", "erag.cost", *argv, "--child", mode, str(batch), str(queries)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{mode} batch {batch} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cost_table(argv: list[str]) -> str:
    """The runtime and memory table of eRAG against end-to-end evaluation, for the command-line
    arguments `argv` (`parse_args`), as markdown with its two header lines."""
    args = parse_args(argv)
    k, b = args.docs, args.batch_queries
    runs = [
        {mode: measure(argv, mode, b * k if mode == "erag" else b, args.queries) for mode in MODES}
        for _ in range(args.repeats)
    ]
    wall = {mode: min(run[mode]["seconds"] for run in runs) for mode in MODES}
    cpu = {mode: min(run[mode]["cpu_seconds"] for run in runs) for mode in MODES}
    query_level = {mode: measure(argv, mode, k if mode == "erag" else 1, args.memory_queries) for mode in MODES}
    document_level = measure(argv, "erag", 1, args.memory_queries)
    params = runs[0]["erag"]["params"] / 1e6
    lines = [
        f"eRAG vs end-to-end, CPU ({args.threads} threads): random T5 ({params:.1f}M params, "
        f"d_model {args.d_model}, {args.layers}+{args.layers} layers), k={k} documents x {args.doc_words} "
        f"words, greedy {args.max_new_tokens} new tokens",
        f"runtime over {args.queries} queries, best of {args.repeats} (wall clock, and CPU time of all "
        f"threads); memory over {args.memory_queries} queries = peak RSS (VmHWM, reset before evaluating) "
        "minus the RSS before evaluating; a fresh process per cell",
        "",
    ]
    batches = f"E2E {b} queries/batch, eRAG {b * k} pairs"
    cells = [
        (f"runtime, wall ({batches})", "s", wall["e2e-concat"], wall["e2e-fid"], wall["erag"]),
        (f"runtime, CPU ({batches})", "s", cpu["e2e-concat"], cpu["e2e-fid"], cpu["erag"]),
        (
            f"memory query-level (E2E 1 query, eRAG {k} pairs)",
            "MiB",
            query_level["e2e-concat"]["memory_mib"],
            query_level["e2e-fid"]["memory_mib"],
            query_level["erag"]["memory_mib"],
        ),
        (
            "memory document-level (E2E 1 query, eRAG 1 pair)",
            "MiB",
            query_level["e2e-concat"]["memory_mib"],
            query_level["e2e-fid"]["memory_mib"],
            document_level["memory_mib"],
        ),
    ]
    table = [["configuration", "E2E concat", "E2E FiD", "eRAG", "concat/eRAG", "FiD/eRAG"]] + [
        [
            label,
            f"{concat:.1f} {unit}",
            f"{fid:.1f} {unit}",
            f"{ours:.1f} {unit}",
            f"{concat / ours:.2f}x",
            f"{fid / ours:.2f}x",
        ]
        for label, unit, concat, fid, ours in cells
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for index, row in enumerate(table):
        cells_text = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("| " + " | ".join(cells_text) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


if __name__ == "__main__":  # a child process of `measure`
    child(parse_args())
