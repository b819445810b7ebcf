"""Runtime and peak memory of eRAG against end-to-end evaluation (the eRAG paper's §3.2, Table 2),
each configuration in a fresh process, and where the time goes.

The reader, the data and the configurations are `rerag.reproduce.erag_cost`'s (its docstring says
what each row holds); `rerag reproduce erag table2` measures the same cells in one process, memory
as live tensor bytes. Here memory on CPU is the growth of the process's resident set size during
the evaluation: the kernel's peak RSS (``VmHWM`` in ``/proc/self/status``), reset to the current RSS
through ``/proc/self/clear_refs`` just before evaluating (after ``malloc_trim`` hands freed heap
pages back, so that memory cached by the allocator is counted), minus that RSS. Each configuration
runs in a fresh process (this script with ``--child``) after model build and a warm-up call. It
counts everything the process touches (activations, allocator caches, Python objects), not only
tensors; tracemalloc would miss torch's allocations.

``--profile`` (`profile_table`) says where the time goes instead: each configuration's wall time
split into the encoder, the decoder's layers, the LM head and the rest (tokenizing, fusing,
`generate`'s own work), timed by forward hooks in one process; the encoder tokens it ran (real and
padded), the decoder positions, and matmul FLOPs counted from those shapes (`flops_encoder`,
`flops_decoder`). Its rows try eRAG's obvious speedups: smaller and larger pair batches, batches in
input order against length-sorted ones (`run_reader`'s order) over documents of varied length
(``--varied-words``), and stopping at the reader's own EOS (no ``min_new_tokens``; `generate` stops
a batch once all its rows have ended). A packed FiD (documents encoded in length-sorted chunks; the
decoder attends to real tokens only, as the reader's own FiD does) is the fair end-to-end side of
the varied-length rows.
``--in-process`` prints `rerag reproduce`'s in-process table for the same arguments, and its verdict
(`cost_verdict`); with ``--device cuda`` it measures on the GPU, where the runtime is judged
(`benchmarks/gpu_check.py`'s ``erag_cost`` part runs it so).

    python benchmarks/erag_cost.py            # T5-small shape, 8 queries x 50 documents x 100 words
    python benchmarks/erag_cost.py --d-model 64 --layers 2 --queries 2 --docs 10   # quick look
    python benchmarks/erag_cost.py --profile --queries 4   # encoder/decoder split, batch sizes, padding, EOS
    python benchmarks/erag_cost.py --in-process --device cuda --queries 64 --batch-queries 16 --repeats 3
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

from rerag.reproduce.erag_cost import (
    COST_HEADER,
    MODES,
    CostSetting,
    build_reader,
    cost_rows,
    cost_verdict,
    evaluate,
    measure_cost,
    setting_label,
    synthetic_data,
    words_label,
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=8, help="queries for the runtime runs")
    parser.add_argument("--memory-queries", type=int, default=2, help="queries for the memory runs")
    parser.add_argument("--docs", type=int, default=50, help="documents per query (k)")
    parser.add_argument(
        "--doc-words", type=word_range, default=(100, 100), help="words per document: N, or MIN-MAX (uniform)"
    )
    parser.add_argument("--batch-queries", type=int, default=2, help="B of the runtime configuration")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--d-ff", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=6, help="encoder and decoder layers each")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=1, help="runtime: best of this many runs per cell")
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda with --in-process (a fresh process per cell measures CPU RSS)"
    )
    parser.add_argument("--profile", action="store_true", help="print `profile_table` instead of `cost_table`")
    parser.add_argument(
        "--in-process", action="store_true", help="print `rerag reproduce erag table2`'s in-process table instead"
    )
    parser.add_argument(
        "--pair-batches", default="10,100,400", help="profile: eRAG pair batch sizes to try (comma-separated)"
    )
    parser.add_argument(
        "--varied-words", type=word_range, default=(20, 180), help="profile: MIN-MAX words for the padding rows"
    )
    parser.add_argument("--fid-chunk", type=int, default=25, help="profile: packed FiD's encoder chunk (documents)")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "BATCH", "QUERIES"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def word_range(text: str) -> tuple[int, int]:
    """``"100"`` -> (100, 100); ``"20-180"`` -> (20, 180)."""
    low, _, high = str(text).partition("-")
    words = (int(low), int(high or low))
    if not 1 <= words[0] <= words[1]:
        raise argparse.ArgumentTypeError(f"need 1 <= MIN <= MAX words, got {text!r}")
    return words


def cost_setting(args: argparse.Namespace) -> CostSetting:
    """The reader, data and batches the arguments name."""
    return CostSetting(**{field.name: getattr(args, field.name) for field in fields(CostSetting)})


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

    mode, batch, queries = args.child[0], int(args.child[1]), int(args.child[2])
    setting = cost_setting(args)
    torch.set_num_threads(args.threads)
    reader = build_reader(setting, fusion="fid" if mode == "e2e-fid" else "concat")
    retrieval, expected = synthetic_data(setting, queries)
    with torch.inference_mode():
        evaluate(reader, mode, {"w": {"question": "w1", "documents": ["w2"]}}, {"w": ["w3"]}, 1)  # warm-up
        reset_peak_rss()
        before = status_mib("VmRSS")
        start, start_cpu = time.perf_counter(), time.process_time()
        evaluate(reader, mode, retrieval, expected, batch)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
        peak = status_mib("VmHWM")
    params = sum(p.numel() for p in reader.model.parameters())
    result = {"seconds": seconds, "cpu_seconds": cpu_seconds, "memory_mib": peak - before, "params": params}
    print(json.dumps(result))


def measure(argv: list[str], mode: str, batch: int, queries: int) -> dict:
    """One configuration in a fresh process (this script with ``ARGV --child ...``), so that its
    peak resident memory is its own."""
    command = [sys.executable, str(Path(__file__).resolve()), *argv, "--child", mode, str(batch), str(queries)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{mode} batch {batch} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cost_table(argv: list[str]) -> str:
    """The runtime and memory table of eRAG against end-to-end evaluation, a fresh process per cell,
    for the command-line arguments `argv` (`parse_args`), as markdown with its two header lines."""
    args = parse_args(argv)
    setting = cost_setting(args)
    k, b = args.docs, args.batch_queries
    runs = [
        {mode: measure(argv, mode, b * k if mode == "erag" else b, args.queries) for mode in MODES}
        for _ in range(args.repeats)
    ]
    query_level = {mode: measure(argv, mode, k if mode == "erag" else 1, args.memory_queries) for mode in MODES}
    cost = {
        "wall": {mode: min(run[mode]["seconds"] for run in runs) for mode in MODES},
        "cpu": {mode: min(run[mode]["cpu_seconds"] for run in runs) for mode in MODES},
        "memory_query_level": {mode: cell["memory_mib"] for mode, cell in query_level.items()},
        "memory_document_level": measure(argv, "erag", 1, args.memory_queries)["memory_mib"],
    }
    lines = [
        f"eRAG vs end-to-end, CPU: {setting_label(setting, runs[0]['erag']['params'])}",
        f"runtime over {args.queries} queries, best of {args.repeats} (wall clock, and CPU time of all "
        f"threads); memory over {args.memory_queries} queries = peak RSS (VmHWM, reset before evaluating) "
        "minus the RSS before evaluating; a fresh process per cell",
        "",
    ]
    return "\n".join(lines + markdown([COST_HEADER, *cost_rows(setting, cost)]))


def in_process_table(argv: list[str]) -> str:
    """`rerag reproduce erag table2`'s measurement (`rerag.reproduce.erag_cost.measure_cost`, one
    process, memory as live tensor bytes) for the command-line arguments `argv`, as markdown."""
    setting = cost_setting(parse_args(argv))
    cost = measure_cost(setting)
    verdict = cost_verdict(setting, cost)
    lines = [
        f"eRAG vs end-to-end, one process on {cost['device']}: {setting_label(setting, cost['params'])}",
        f"memory = peak of live tensor bytes above those held before evaluating; decoder positions "
        f"{cost['decoder_positions']}",
        "",
    ]
    ending = ["", f"Reproduced: {verdict.reproduced} ({verdict.ours}): {verdict.why}"]
    return "\n".join(lines + markdown([COST_HEADER, *cost_rows(setting, cost)]) + ending)


def markdown(table: list[list[str]]) -> list[str]:
    """Rows (the first is the header) as aligned markdown lines: first column left, others right."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = []
    for index, row in enumerate(table):
        cells_text = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("| " + " | ".join(cells_text) + " |")
        if index == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return lines


# --- profile: where the time goes -------------------------------------------------------------


class Meter:
    """Times and counts a T5 reader's work while it is entered: forward hooks on the encoder stack,
    the decoder stack and the LM head (wall seconds of each, shapes for token and FLOP counts), and
    a wrapper around ``model.generate`` (decoder positions spent on rows that already emitted EOS).

    FLOPs are 2 x the multiply-adds of the matmuls (projections, attention scores and mixing, LM
    head), from the shapes each call sees: padded positions cost as much as real ones. The
    decoder's cross-attention keys and values are projected once per generation (the first step,
    empty cache) and counted in `flops_decoder`. Norms, softmax, embeddings are left out."""

    def __init__(self, model):
        config = model.config
        self.model = model
        self.d, self.inner, self.ff = config.d_model, config.num_heads * config.d_kv, config.d_ff
        self.ff_mats = 3 if getattr(config, "is_gated_act", False) else 2
        self.enc_layers, self.dec_layers = config.num_layers, config.num_decoder_layers
        self.vocab = model.lm_head.out_features
        self.seconds = {"encoder": 0.0, "decoder": 0.0, "lm_head": 0.0}  # wall
        self.cpu_seconds = {"encoder": 0.0, "decoder": 0.0, "lm_head": 0.0}  # all threads' CPU time
        self.counts = {
            "encoder_calls": 0,
            "encoder_rows": 0,
            "encoder_tokens": 0,  # padded: rows x padded length
            "encoder_real": 0,  # under the attention mask
            "decoder_positions": 0,  # rows x new positions, over all decoder calls
            "cross_keys": 0,  # decoder positions x encoder positions they attend over (padded)
            "after_eos": 0,  # decoder positions of rows that had already emitted EOS
            "flops_encoder": 0,
            "flops_decoder": 0,  # layers, cross K/V projections, LM head
        }
        self._start: dict[str, tuple[float, float]] = {}
        self._handles: list = []

    def _pre(self, name):
        def hook(module, args, kwargs):
            self._start[name] = (time.perf_counter(), time.process_time())
            if name == "encoder":
                self._count_encoder(kwargs)
            elif name == "decoder":
                self._count_decoder(kwargs)
            else:
                positions = args[0].shape[:-1].numel()
                self.counts["flops_decoder"] += 2 * positions * self.d * self.vocab

        return hook

    def _post(self, name):
        def hook(module, args, kwargs, output):
            wall, cpu = self._start.pop(name)
            self.seconds[name] += time.perf_counter() - wall
            self.cpu_seconds[name] += time.process_time() - cpu

        return hook

    def _count_encoder(self, kwargs):
        ids, mask = kwargs["input_ids"], kwargs.get("attention_mask")
        rows, length = ids.shape
        c = self.counts
        c["encoder_calls"] += 1
        c["encoder_rows"] += rows
        c["encoder_tokens"] += rows * length
        c["encoder_real"] += int(mask.sum()) if mask is not None else rows * length
        per_token = 4 * self.d * self.inner + self.ff_mats * self.d * self.ff
        c["flops_encoder"] += (
            2 * self.enc_layers * (rows * length * per_token + 2 * rows * length * length * self.inner)
        )

    def _count_decoder(self, kwargs):
        ids, states = kwargs["input_ids"], kwargs["encoder_hidden_states"]
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        rows, new = ids.shape
        sources = states.shape[1]
        past = int(cache.get_seq_length()) if cache is not None else 0
        positions = rows * new
        per_position = 6 * self.d * self.inner + self.ff_mats * self.d * self.ff  # self q,k,v,o; cross q,o; FFN
        attention = 2 * positions * (past + new + sources) * self.inner  # scores and mixing, self and cross
        cross_kv = 2 * rows * sources * self.d * self.inner if past == 0 else 0  # once per generation
        c = self.counts
        c["decoder_positions"] += positions
        c["cross_keys"] += positions * sources
        c["flops_decoder"] += 2 * (self.dec_layers * (positions * per_position + attention + cross_kv))

    def _generate(self, original, eos_id):
        def generate(*args, **kwargs):
            out = original(*args, **kwargs)
            steps = out[:, 1:]  # after the decoder start token
            ended = (steps == eos_id).int().cumsum(dim=1)
            # a position is wasted when its row emitted EOS at an earlier step
            self.counts["after_eos"] += int(((ended - (steps == eos_id).int()) > 0).sum())
            return out

        return generate

    def __enter__(self) -> Meter:
        model = self.model
        for name, module in (
            ("encoder", model.get_encoder()),
            ("decoder", model.get_decoder()),
            ("lm_head", model.lm_head),
        ):
            self._handles.append(module.register_forward_pre_hook(self._pre(name), with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post(name), with_kwargs=True))
        model.generate = self._generate(model.generate, model.config.eos_token_id)
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        del self.model.generate  # the instance attribute; the class's method is back


def packed_fid(reader, questions: list[str], contexts: list[list[str]], chunk: int) -> list[str]:
    """Fusion-in-Decoder without padding waste: the batch's (question, document) prompts encoded in
    length-sorted chunks of `chunk`, each query's real (unpadded) encoder states concatenated for the
    decoder. The same answers as ``fusion="fid"`` up to float rounding (padding is masked there)."""
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    prompts = [(row, reader.prompt(q, doc)) for row, (q, docs) in enumerate(zip(questions, contexts)) for doc in docs]
    lengths = [len(ids) for ids in reader.tokenizer([p for _, p in prompts]).input_ids]
    order = sorted(range(len(prompts)), key=lambda i: -lengths[i])
    pieces: list[list] = [[] for _ in questions]
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        encoded = reader._encode([prompts[i][1] for i in part])
        states = reader.model.get_encoder()(**encoded).last_hidden_state
        for row, i in enumerate(part):
            pieces[prompts[i][0]].append((i, states[row, : lengths[i]]))
    fused_rows = [torch.cat([s for _, s in sorted(p, key=lambda x: x[0])]) for p in pieces]
    width = max(len(r) for r in fused_rows)
    fused = fused_rows[0].new_zeros(len(questions), width, fused_rows[0].shape[-1])
    mask = torch.zeros(len(questions), width, dtype=torch.long)
    for row, states in enumerate(fused_rows):
        fused[row, : len(states)], mask[row, : len(states)] = states, 1
    generated = reader._generate(encoder_outputs=BaseModelOutput(last_hidden_state=fused), attention_mask=mask)
    return [text.strip() for text in reader.tokenizer.batch_decode(generated, skip_special_tokens=True)]


@contextmanager
def stop_at_eos(reader, on: bool):
    """With `on`, the reader's ``min_new_tokens`` is lifted for the block: rows end at their own EOS,
    and `generate` stops a batch once every row has ended."""
    saved = reader.generate_kwargs
    if on:
        reader.generate_kwargs = {k: v for k, v in saved.items() if k != "min_new_tokens"}
    try:
        yield
    finally:
        reader.generate_kwargs = saved


def profile_run(
    reader,
    retrieval: dict,
    mode: str,
    batch: int,
    *,
    sort: bool = True,
    eos: bool = False,
    fid_chunk: int = 25,
) -> dict:
    """One configuration's time split and counts (`Meter`), in this process. `mode`: ``erag`` (one
    reader call row per (query, document)), ``e2e-concat`` / ``e2e-fid`` (one row per query, the
    reader's own fusion) or ``e2e-fid-packed`` (`packed_fid`). `batch` rows per call, in
    `run_reader`'s order (longest prompt first) with `sort`, else in input order. Returns
    ``seconds`` (wall), ``encoder_s``, ``decoder_s``, ``lm_head_s``, ``other_s``, the same in CPU
    time of all threads (``cpu_seconds``, ``encoder_cpu_s``, ...) and `Meter`'s counts."""
    import torch

    records = list(retrieval.values())
    if mode == "erag":
        items = [(r["question"], [doc]) for r in records for doc in r["documents"]]
    else:
        items = [(r["question"], list(r["documents"])) for r in records]
    order = list(range(len(items)))
    if sort:  # run_reader's key
        order.sort(key=lambda i: len(items[i][0]) + sum(map(len, items[i][1])), reverse=True)
    if mode == "e2e-fid-packed":
        call = lambda qs, cs: packed_fid(reader, qs, cs, fid_chunk)  # noqa: E731
    else:
        call = reader
    with torch.inference_mode(), stop_at_eos(reader, eos), Meter(reader.model) as meter:
        start, start_cpu = time.perf_counter(), time.process_time()
        for first in range(0, len(order), batch):
            part = order[first : first + batch]
            call([items[i][0] for i in part], [items[i][1] for i in part])
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    parts = {f"{name}_s": value for name, value in meter.seconds.items()}
    cpu_parts = {f"{name}_cpu_s": value for name, value in meter.cpu_seconds.items()}
    return {
        "seconds": seconds,
        **parts,
        "other_s": seconds - sum(parts.values()),
        "cpu_seconds": cpu_seconds,
        **cpu_parts,
        "other_cpu_s": cpu_seconds - sum(cpu_parts.values()),
        "rows": len(items),
        **meter.counts,
    }


def gflop(flops: float) -> str:
    """FLOPs in GFLOP, 3 significant digits for small numbers, whole numbers from 100."""
    value = flops / 1e9
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def profile_table(argv: list[str]) -> str:
    """Where eRAG's and end-to-end evaluation's time goes (`profile_run` per row, one process), for
    the command-line arguments `argv` (`parse_args`): markdown with its header lines, and a closing
    line comparing eRAG's best row with E2E FiD on each document-length setting."""
    import torch

    args = parse_args(argv)
    setting = cost_setting(args)
    torch.set_num_threads(args.threads)
    k, b = args.docs, args.batch_queries
    total_pairs = args.queries * k
    readers = {fusion: build_reader(setting, fusion) for fusion in ("concat", "fid")}
    warm = {"w": {"question": "w1", "documents": ["w2", "w3"]}}
    for reader in readers.values():
        for mode in ("erag", "e2e-fid" if reader.fusion == "fid" else "e2e-concat"):
            profile_run(reader, warm, mode, 2)
    uniform = synthetic_data(setting, args.queries)[0]
    varied = synthetic_data(setting, args.queries, args.varied_words)[0]
    uniform_label, varied_label = words_label(args.doc_words), words_label(args.varied_words)
    pair_batches = sorted({min(int(x), total_pairs) for x in args.pair_batches.split(",")} | {b * k})
    rows = [  # (group, label, reader, data, mode, batch, sort, eos)
        ("uniform", f"E2E concat, {b} queries/batch", "concat", uniform, "e2e-concat", b, True, False),
        ("uniform", f"E2E FiD, {b} queries/batch", "fid", uniform, "e2e-fid", b, True, False),
        *[("uniform", f"eRAG, {n} pairs/batch", "concat", uniform, "erag", n, True, False) for n in pair_batches],
        ("uniform", f"eRAG, {b * k} pairs/batch, stop at EOS", "concat", uniform, "erag", b * k, True, True),
        ("varied", f"E2E FiD, {b} queries/batch", "fid", varied, "e2e-fid", b, True, False),
        (
            "varied",
            f"E2E FiD packed ({args.fid_chunk}-doc chunks), {b} queries/batch",
            "fid",
            varied,
            "e2e-fid-packed",
            b,
            True,
            False,
        ),
        ("varied", f"eRAG, {b * k} pairs/batch, input order", "concat", varied, "erag", b * k, False, False),
        ("varied", f"eRAG, {b * k} pairs/batch, length-sorted", "concat", varied, "erag", b * k, True, False),
    ]
    best: list[dict | None] = [None] * len(rows)
    for _ in range(args.repeats):  # all rows, then all again: slow drift hits every row alike
        for index, (_, _, fusion, data, mode, batch, sort, eos) in enumerate(rows):
            result = profile_run(readers[fusion], data, mode, batch, sort=sort, eos=eos, fid_chunk=args.fid_chunk)
            if best[index] is None or result["seconds"] < best[index]["seconds"]:
                best[index] = result
    results = [(group, label, mode, result) for (group, label, _, _, mode, *_), result in zip(rows, best)]
    params = sum(p.numel() for p in readers["fid"].model.parameters()) / 1e6
    lines = [
        f"Where the time goes, CPU ({args.threads} threads): random T5 ({params:.1f}M params, d_model "
        f"{args.d_model}, {args.layers}+{args.layers} layers), {args.queries} queries x k={k} documents, greedy "
        f"{args.max_new_tokens} new tokens (exactly, except 'stop at EOS'); one process, the run with the least "
        f"wall time of {args.repeats} per row (rows interleaved); wall seconds split by "
        "forward hooks (other = tokenizing, fusing, generate's own loop); CPU s = CPU time of all threads; "
        "tokens = encoder tokens real/padded; dec pos = decoder positions (rows x steps); GFLOP = 2 x matmul "
        "multiply-adds from the shapes run",
        "",
    ]
    header = ["configuration", "wall s", "CPU s", "encoder s", "decoder s", "LM head s", "other s"]
    header += ["enc tokens real/padded", "dec pos", "after EOS", "GFLOP enc", "GFLOP dec", "GFLOP/s"]
    table = [header]
    for group, label, _, r in results:
        words = uniform_label if group == "uniform" else varied_label
        flops = r["flops_encoder"] + r["flops_decoder"]
        table.append(
            [
                f"{words} words: {label}",
                f"{r['seconds']:.1f}",
                f"{r['cpu_seconds']:.1f}",
                f"{r['encoder_s']:.1f}",
                f"{r['decoder_s']:.1f}",
                f"{r['lm_head_s']:.1f}",
                f"{r['other_s']:.1f}",
                f"{r['encoder_real']}/{r['encoder_tokens']}",
                str(r["decoder_positions"]),
                str(r["after_eos"]),
                gflop(r["flops_encoder"]),
                gflop(r["flops_decoder"]),
                gflop(flops / r["seconds"]),
            ]
        )
    lines += markdown(table)
    summary = []
    for group, words in (("uniform", uniform_label), ("varied", varied_label)):
        fid = min((r["seconds"], label) for g, label, mode, r in results if g == group and mode.startswith("e2e-fid"))
        ours = min((r["seconds"], label) for g, label, mode, r in results if g == group and mode == "erag")
        summary.append(
            f"{words} words: fastest E2E FiD ({fid[1]}) / fastest eRAG ({ours[1]}) = {fid[0] / ours[0]:.2f}x"
        )
    lines += ["", "; ".join(summary)]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.device != "cpu" and not (args.in_process or args.child):
        sys.exit("--device cuda measures in one process: add --in-process")
    if args.child:  # a child process of `measure`
        child(args)
    elif args.profile:
        print(profile_table(argv))
    elif args.in_process:
        print(in_process_table(argv))
    else:
        print(cost_table(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
