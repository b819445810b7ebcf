"""eRAG's Table 2, measured in this process: runtime and peak memory of eRAG against end-to-end
evaluation (the eRAG paper's §3.2), and its verdict (`cost_verdict`).

The reader is a randomly initialized T5 (T5-small's shape by default, the paper's LLM), greedy,
over synthetic queries with k documents of w words each. End-to-end evaluation
(`erag.end_to_end_scores`) reads each query's whole list, either concatenated into one input (IPA)
or Fusion-in-Decoder (FiD, the paper's setting); eRAG (`erag.annotate`) reads each (query,
document) pair alone. Every output is exactly `max_new_tokens` long (``min_new_tokens``), so that
a random model's early end-of-sequence favours neither side.

Configurations (Table 2):
- runtime: both sides hold the same number of documents per batch: B queries x k documents for
  end-to-end, B*k (query, document) pairs for eRAG; wall and CPU seconds, the best of `repeats`;
- memory, query-level: end-to-end batch 1 query, eRAG batch k pairs (one query's documents);
- memory, document-level: end-to-end batch 1 query, eRAG batch 1 pair.

Memory is the peak of the bytes that live tensors hold during one evaluation, above what they held
when it began (the reader's weights). On the CPU PyTorch's profiler records every tensor allocation
and free (`profile_memory`), and the running sum's maximum is the peak (`peak_tensor_mib`); on a GPU
the CUDA caching allocator's own peak counter (`peak_cuda_mib`). It counts the activations, caches
and outputs of the evaluation, not Python objects or the allocator's caches.

The paper measures on a GPU (an A100), each side batched as large as the GPU holds: the speed-up it
reports comes from that batching. A CPU's time follows the arithmetic instead, which eRAG does not
reduce against FiD (the same encoder work, and k times the decoder positions), so the runtime is
judged only where `setting.device` is a CUDA GPU (`cost_verdict`; `benchmarks/gpu_check.py` runs it
on one); memory is judged on either.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from rerag.reproduce.verdict import Verdict, combined, holds, untestable

MODES = ("e2e-concat", "e2e-fid", "erag")
#: The header of the cost table (`cost_rows`).
COST_HEADER = ["configuration", "E2E concat", "E2E FiD", "eRAG", "concat/eRAG", "FiD/eRAG"]
#: The paper's Table 2 against end-to-end evaluation (§3.2): eRAG's speed-up and its memory savings.
PAPER_SPEEDUP = "2.47x on average (1.23x to 3.25x)"
PAPER_QUERY_LEVEL, PAPER_DOCUMENT_LEVEL = "7x to 15x", "30x to 48x"


@dataclass(frozen=True)
class CostSetting:
    """What Table 2 measures: the synthetic data, the batches and the random reader's shape.

    queries: queries of the runtime rows. memory_queries: queries of the memory rows. docs:
    documents per query (k). doc_words: words per document, uniform in [min, max]. batch_queries: B
    of the runtime rows. d_model, d_ff, layers (encoder and decoder each), heads, vocab: the T5.
    max_new_tokens: the length of every output. threads: torch CPU threads while measuring.
    repeats: runtime, the best of this many runs per cell. device: "cpu" or "cuda" (the paper's
    setting; the runtime is judged there only).
    """

    queries: int = 8
    memory_queries: int = 2
    docs: int = 50
    doc_words: tuple[int, int] = (100, 100)
    batch_queries: int = 2
    d_model: int = 512
    d_ff: int = 2048
    layers: int = 6
    heads: int = 8
    vocab: int = 32000
    max_new_tokens: int = 8
    threads: int = 2
    repeats: int = 1
    device: str = "cpu"


def build_reader(setting: CostSetting, fusion: str):
    """An `erag.HFReader` over a random T5 of `setting`'s shape (seed 0) with a word-level tokenizer
    of its vocabulary, `fusion` "concat" or "fid", every output exactly `max_new_tokens` long."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    from erag import HFReader

    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    words = [f"w{i}" for i in range(setting.vocab)] + "Answer the question using context Question :".split()
    special = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}
    trainer = trainers.WordLevelTrainer(special_tokens=list(special.values()))
    backend.train_from_iterator([" ".join(words)], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **special)
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=setting.d_model,
        d_ff=setting.d_ff,
        d_kv=setting.d_model // setting.heads,
        num_layers=setting.layers,
        num_heads=setting.heads,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    model = T5ForConditionalGeneration(config).eval().to(setting.device)
    return HFReader(
        model,
        tokenizer,
        max_new_tokens=setting.max_new_tokens,
        fusion=fusion,
        generate_kwargs={"min_new_tokens": setting.max_new_tokens},
    )


def synthetic_data(setting: CostSetting, queries: int, words: tuple[int, int] | None = None):
    """(retrieval results, expected outputs) of `queries` queries of 10 words, each with
    ``setting.docs`` documents of `words` (default ``setting.doc_words``) words: uniform in [MIN, MAX]."""
    low, high = words or setting.doc_words
    rng = random.Random(0)
    word = lambda: f"w{rng.randrange(setting.vocab)}"  # noqa: E731
    length = lambda: low if low == high else rng.randint(low, high)  # noqa: E731
    retrieval = {
        f"q{i}": {
            "question": " ".join(word() for _ in range(10)),
            "documents": [" ".join(word() for _ in range(length())) for _ in range(setting.docs)],
        }
        for i in range(queries)
    }
    return retrieval, {qid: [word()] for qid in retrieval}


def evaluate(reader, mode: str, retrieval: dict, expected: dict, batch: int):
    """One evaluation: eRAG's per-document labels (`mode` "erag", `batch` pairs per reader call) or
    end-to-end scores (`batch` queries per call)."""
    from erag import annotate, end_to_end_scores

    evaluation = annotate if mode == "erag" else end_to_end_scores
    return evaluation(retrieval, expected, reader, "em", batch_size=batch)


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work (a no-op on the CPU), so that a clock read after it counts it."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: str = "cpu") -> tuple[float, float]:
    """Wall and CPU seconds (all threads; on a GPU, the host's) of `fn()`, the GPU's queue drained
    before and after."""
    synchronize(device)
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    synchronize(device)
    return time.perf_counter() - start, time.process_time() - start_cpu


def peak_cuda_mib(fn: Callable[[], object], device: str = "cuda") -> float:
    """The peak of the bytes that live CUDA tensors hold while `fn()` runs, above what they held
    when it began, in MiB: the caching allocator's peak counter, reset just before."""
    import torch

    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2**20


def peak_mib(fn: Callable[[], object], device: str) -> float:
    """`peak_cuda_mib` on a GPU, `peak_tensor_mib` on the CPU."""
    return peak_cuda_mib(fn, device) if device.startswith("cuda") else peak_tensor_mib(fn)


def device_name(device: str) -> str:
    """The GPU's name for a CUDA device, else ``"cpu"``."""
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def peak_tensor_mib(fn: Callable[[], object]) -> float:
    """The peak of the bytes that live CPU tensors hold while `fn()` runs, above what they held
    when it began, in MiB: the running sum of the allocations and frees that PyTorch's profiler
    records (`profile_memory`), in the order they happened."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records = [
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and event.device_type() == DeviceType.CPU
    ]
    held = peak = 0
    for _, nbytes in sorted(records, key=lambda record: record[0]):
        held += nbytes
        peak = max(peak, held)
    return peak / 2**20


def measure_cost(setting: CostSetting) -> dict:
    """Every cell of Table 2, in this process on ``setting.device``, with ``setting.threads`` torch
    threads (the caller's count is restored after): ``wall`` and ``cpu`` seconds per mode (runtime
    rows), ``memory_query_level`` MiB per mode, ``memory_document_level`` MiB (eRAG, one pair per
    call), ``decoder_positions`` per mode (runtime rows: rows x steps), the reader's ``params`` and
    the ``device`` measured on (its name: "cpu" or the GPU's)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(setting.threads)
    try:
        readers = {fusion: build_reader(setting, fusion) for fusion in ("concat", "fid")}
        reader_of = {"e2e-concat": readers["concat"], "e2e-fid": readers["fid"], "erag": readers["concat"]}
        k, b = setting.docs, setting.batch_queries
        runtime_data = synthetic_data(setting, setting.queries)
        memory_data = synthetic_data(setting, setting.memory_queries)
        warm = ({"w": {"question": "w1", "documents": ["w2"]}}, {"w": ["w3"]})
        runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
        with torch.inference_mode():
            for mode in MODES:
                evaluate(reader_of[mode], mode, *warm, 1)
            for _ in range(setting.repeats):  # every cell, then every cell again: slow drift hits each alike
                for mode in MODES:
                    batch = b * k if mode == "erag" else b
                    run = partial(evaluate, reader_of[mode], mode, *runtime_data, batch)
                    runs[mode].append(timed(run, setting.device))
            query_level = {
                mode: peak_mib(
                    partial(evaluate, reader_of[mode], mode, *memory_data, k if mode == "erag" else 1), setting.device
                )
                for mode in MODES
            }
            document_level = peak_mib(partial(evaluate, readers["concat"], "erag", *memory_data, 1), setting.device)
    finally:
        torch.set_num_threads(threads)
    rows = {mode: setting.queries * (k if mode == "erag" else 1) for mode in MODES}
    return {
        "wall": {mode: min(wall for wall, _ in runs[mode]) for mode in MODES},
        "cpu": {mode: min(cpu for _, cpu in runs[mode]) for mode in MODES},
        "memory_query_level": query_level,
        "memory_document_level": document_level,
        "decoder_positions": {mode: rows[mode] * setting.max_new_tokens for mode in MODES},
        "params": sum(p.numel() for p in readers["concat"].model.parameters()),
        "device": device_name(setting.device),
    }


def cost_rows(setting: CostSetting, cost: dict) -> list[list[str]]:
    """The cost table's rows under `COST_HEADER`, from `measure_cost`'s dict (or one of the same keys)."""
    k, b = setting.docs, setting.batch_queries
    batches = f"E2E {b} queries/batch, eRAG {b * k} pairs"
    query, document = cost["memory_query_level"], cost["memory_document_level"]
    cells = [
        (f"runtime, wall ({batches})", "s", *(cost["wall"][mode] for mode in MODES)),
        (
            f"runtime, {'CPU' if setting.device == 'cpu' else 'host CPU'} ({batches})",
            "s",
            *(cost["cpu"][m] for m in MODES),
        ),
        (f"memory query-level (E2E 1 query, eRAG {k} pairs)", "MiB", *(query[mode] for mode in MODES)),
        ("memory document-level (E2E 1 query, eRAG 1 pair)", "MiB", query["e2e-concat"], query["e2e-fid"], document),
    ]
    return [
        [
            label,
            f"{concat:.1f} {unit}",
            f"{fid:.1f} {unit}",
            f"{ours:.1f} {unit}",
            ratio(concat, ours),
            ratio(fid, ours),
        ]
        for label, unit, concat, fid, ours in cells
    ]


def ratio(numerator: float, denominator: float) -> str:
    """``"2.07x"``; ``"inf"`` when the denominator is not positive."""
    return f"{numerator / denominator:.2f}x" if denominator > 0 else "inf"


def words_label(words: tuple[int, int]) -> str:
    """``(100, 100)`` -> ``"100"``; ``(20, 180)`` -> ``"20-180"``."""
    return str(words[0]) if words[0] == words[1] else f"{words[0]}-{words[1]}"


def setting_label(setting: CostSetting, params: int) -> str:
    """One line naming the reader and the data of a cost table."""
    return (
        f"random T5 ({params / 1e6:.1f}M params, d_model {setting.d_model}, {setting.layers}+{setting.layers} "
        f"layers), k={setting.docs} documents x {words_label(setting.doc_words)} words, greedy "
        f"{setting.max_new_tokens} new tokens, "
        + (f"{setting.threads} CPU threads" if setting.device == "cpu" else f"on {setting.device}")
    )


def cost_verdict(setting: CostSetting, cost: dict) -> Verdict:
    """eRAG Table 2's finding against E2E FiD (the paper's end-to-end reader), in three parts
    (`combined`): eRAG is faster, judged only where `cost` was measured on a GPU (the paper's
    speed-up is GPU batching; on the CPU the part is not testable); and it needs less memory at
    the query level (eRAG batching one query's k documents against FiD reading the query) and at
    the document level (eRAG one document at a time). `cost`: `measure_cost`'s dict."""
    k, b = setting.docs, setting.batch_queries
    wall, query, document = cost["wall"], cost["memory_query_level"], cost["memory_document_level"]
    speed = quotient(wall["e2e-fid"], wall["erag"])
    runtime_line = f"runtime on {cost['device']}: E2E FiD time / eRAG time {speed:.2f}x"
    if cost["device"] == "cpu":
        runtime = untestable(
            f"{runtime_line} (not judged)",
            "the paper's speed-up comes from batching on a GPU (each side's batch as large as an A100 holds); "
            "there was no CUDA GPU in this process, and a CPU's time follows the arithmetic, which eRAG does not cut",
        )
    else:
        runtime = holds(
            runtime_line,
            speed > 1,
            f"eRAG {wall['erag']:.3g} s against E2E FiD {wall['e2e-fid']:.3g} s over {setting.queries} queries x "
            f"{k} documents ({b * k} pairs or {b} queries a batch), the best of {setting.repeats}; "
            f"the paper {PAPER_SPEEDUP}",
        )
    query_ratio, document_ratio = quotient(query["e2e-fid"], query["erag"]), quotient(query["e2e-fid"], document)
    return combined(
        runtime,
        holds(
            f"memory, query-level: E2E FiD / eRAG {query_ratio:.2f}x",
            query_ratio > 1,
            f"E2E FiD {query['e2e-fid']:.3g} MiB for one query against eRAG {query['erag']:.3g} MiB for its {k} "
            f"documents in one batch; the paper {PAPER_QUERY_LEVEL}",
        ),
        holds(
            f"memory, document-level: E2E FiD / eRAG {document_ratio:.2f}x",
            document_ratio > 1,
            f"E2E FiD {query['e2e-fid']:.3g} MiB for one query against eRAG {document:.3g} MiB for one document; "
            f"the paper {PAPER_DOCUMENT_LEVEL}",
        ),
    )


def quotient(numerator: float, denominator: float) -> float:
    """numerator / denominator; infinity when the denominator is not positive (nothing measured)."""
    return numerator / denominator if denominator > 0 else float("inf")
