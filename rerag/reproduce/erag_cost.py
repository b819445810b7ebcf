"""eRAG's Table 2, measured in this process: runtime and peak memory of eRAG against end-to-end
evaluation (the eRAG paper's §3.2).

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
when it began (the reader's weights): PyTorch's profiler records every tensor allocation and free
(`profile_memory`), and the running sum's maximum is the peak (`peak_tensor_mib`). It counts the
activations, caches and outputs of the evaluation, not Python objects or the allocator's caches.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

MODES = ("e2e-concat", "e2e-fid", "erag")
#: The header of the cost table (`cost_rows`).
COST_HEADER = ["configuration", "E2E concat", "E2E FiD", "eRAG", "concat/eRAG", "FiD/eRAG"]


@dataclass(frozen=True)
class CostSetting:
    """What Table 2 measures: the synthetic data, the batches and the random reader's shape.

    queries: queries of the runtime rows. memory_queries: queries of the memory rows. docs:
    documents per query (k). doc_words: words per document, uniform in [min, max]. batch_queries: B
    of the runtime rows. d_model, d_ff, layers (encoder and decoder each), heads, vocab: the T5.
    max_new_tokens: the length of every output. threads: torch CPU threads while measuring.
    repeats: runtime, the best of this many runs per cell.
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
    model = T5ForConditionalGeneration(config).eval()
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


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds (all threads) of `fn()`."""
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - start_cpu


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
    """Every cell of Table 2, in this process, with ``setting.threads`` torch threads (the caller's
    count is restored after): ``wall`` and ``cpu`` seconds per mode (runtime rows),
    ``memory_query_level`` MiB per mode, ``memory_document_level`` MiB (eRAG, one pair per call),
    ``decoder_positions`` per mode (runtime rows: rows x steps) and the reader's ``params``."""
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
                    runs[mode].append(timed(partial(evaluate, reader_of[mode], mode, *runtime_data, batch)))
            query_level = {
                mode: peak_tensor_mib(
                    partial(evaluate, reader_of[mode], mode, *memory_data, k if mode == "erag" else 1)
                )
                for mode in MODES
            }
            document_level = peak_tensor_mib(partial(evaluate, readers["concat"], "erag", *memory_data, 1))
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
    }


def cost_rows(setting: CostSetting, cost: dict) -> list[list[str]]:
    """The cost table's rows under `COST_HEADER`, from `measure_cost`'s dict (or one of the same keys)."""
    k, b = setting.docs, setting.batch_queries
    batches = f"E2E {b} queries/batch, eRAG {b * k} pairs"
    query, document = cost["memory_query_level"], cost["memory_document_level"]
    cells = [
        (f"runtime, wall ({batches})", "s", *(cost["wall"][mode] for mode in MODES)),
        (f"runtime, CPU ({batches})", "s", *(cost["cpu"][mode] for mode in MODES)),
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
        f"{setting.max_new_tokens} new tokens, {setting.threads} CPU threads"
    )
