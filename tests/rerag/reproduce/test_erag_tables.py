"""eRAG's verdicts (rerag.reproduce.erag_tables, and Table 2's in erag_cost) on hand-made numbers:
each follows the paper's finding, and its reason is computed from the numbers, so it changes with
them. The table functions are run on fake `rerag erag` runs: nothing is trained."""

import json

import numpy as np
import pytest

from erag.correlation import correlate
from rerag.reproduce import erag_tables
from rerag.reproduce.erag_cost import CostSetting, cost_verdict
from rerag.reproduce.erag_tables import (
    FIXED_METRIC,
    SIZE_MARGIN,
    figure1_verdict,
    figure2_verdict,
    figure3_verdict,
    table1_verdict,
)
from rerag.reproduce.verdict import INCONCLUSIVE, NO, PARTLY, UNTESTABLE, YES
from rerag.reproduce.workspace import Workspace

N = 80


def numbers(agreement: float, seed: int = 0, n: int = N) -> dict[str, tuple[float, float]]:
    """{query id: (metric, end-to-end)}: the metric equals the 0/1 end-to-end score on a share
    `agreement` of the questions, and is drawn at random on the others."""
    rng = np.random.default_rng(seed)
    e2e = rng.integers(0, 2, n).astype(float)
    metric = np.where(rng.random(n) < agreement, e2e, rng.random(n))
    return {f"q{i:03d}": (float(m), float(y)) for i, (m, y) in enumerate(zip(metric, e2e))}


def with_e2e(base: dict, metric_agreement: float, seed: int) -> dict:
    """Another labeling's numbers over `base`'s questions and end-to-end scores."""
    rng = np.random.default_rng(seed)
    return {q: (y if rng.random() < metric_agreement else float(rng.random()), y) for q, (_, y) in sorted(base.items())}


def test_table1_holds_where_erag_leads_and_its_reason_names_the_taus():
    erag = numbers(0.9)
    lead = table1_verdict(
        {"retriever lists": {"erag": {"P@10": erag}, "contains_answer": {"P@10": with_e2e(erag, 0.2, 1)}}}
    )
    behind = table1_verdict(
        {"retriever lists": {"erag": {"P@10": erag}, "contains_answer": {"P@10": with_e2e(erag, 1.0, 1)}}}
    )
    assert lead.reproduced == YES and behind.reproduced == NO
    assert "over 80 questions" in lead.why and lead.why != behind.why
    assert lead.ours.startswith("retriever lists: eRAG (P@10) minus contains_answer (P@10), Kendall's tau")


def test_table1_takes_each_labelings_best_metric_and_says_why_one_is_undefined():
    erag = numbers(0.9)
    weak, strong = with_e2e(erag, 0.1, 2), with_e2e(erag, 0.5, 3)
    verdict = table1_verdict({"re lists": {"erag": {"MAP": erag}, "contains_answer": {"MAP": weak, "MRR": strong}}})
    assert "contains_answer (MRR)" in verdict.ours  # the other labeling's best metric, not its first
    constant = {q: (1.0, y) for q, (_, y) in erag.items()}
    untested = table1_verdict({"re lists": {"erag": {"P@10": constant}, "contains_answer": {"P@10": weak}}})
    assert untested.reproduced == UNTESTABLE
    assert "erag (P@10): the retrieval metric is constant (1) over the 80 queries" in untested.why


def test_figure1_judges_every_list_length():
    erag = numbers(0.9)
    by_k = {
        1: {"erag": ("P@1", erag), "contains_answer": ("P@1", with_e2e(erag, 0.2, 1))},
        2: {"erag": ("P@2", erag), "contains_answer": ("P@2", with_e2e(erag, 1.0, 1))},
    }
    verdict = figure1_verdict(by_k)
    assert verdict.reproduced == PARTLY and "k=1: yes" in verdict.why and "k=2: no" in verdict.why
    both = figure1_verdict({1: by_k[1], 2: {**by_k[2], "contains_answer": ("P@2", with_e2e(erag, 0.1, 4))}})
    assert both.reproduced == YES and both.why != verdict.why


def test_figure2_holds_when_the_readers_taus_agree_within_the_margin():
    small = numbers(0.9, seed=5, n=400)
    same = figure2_verdict("P@10", {"generator": (1_700_000, small), "SmolLM2": (135_000_000, dict(small))})
    assert same.reproduced == YES and f"+-{SIZE_MARGIN:g}" in same.why
    assert "with 135M parameters against" in same.why and "over 400 questions" in same.why
    apart = figure2_verdict("P@10", {"generator": (1_700_000, small), "SmolLM2": (135e6, with_e2e(small, 0.0, 6))})
    assert apart.reproduced == NO and "against the paper" in apart.why
    assert apart.ours.startswith("eRAG (P@10) with SmolLM2 minus with generator")  # the larger minus the smaller


def test_figure2_is_inconclusive_on_too_few_questions_and_pairs_the_questions_both_read():
    small = numbers(0.9, seed=7)
    large = with_e2e(small, 0.8, 8)
    few = {q: large[q] for q in sorted(large)[:12]}  # the larger reader read 12 questions
    verdict = figure2_verdict("P@10", {"generator": (1_700_000, small), "SmolLM2": (135e6, few)})
    assert verdict.reproduced == INCONCLUSIVE and "over 12 questions" in verdict.why
    assert "reaches past" in verdict.why
    alone = figure2_verdict("P@10", {"generator": (1_700_000, small)})
    assert alone.reproduced == UNTESTABLE


def test_figure3_compares_the_fixed_metric_and_its_reason_changes_with_the_numbers():
    fid = numbers(0.9, seed=1)
    ahead = figure3_verdict("P@10", fid, with_e2e(fid, 0.2, 2))
    behind = figure3_verdict("P@10", with_e2e(fid, 0.2, 2), fid)
    assert ahead.reproduced == YES and behind.reproduced == NO and ahead.why != behind.why
    constant = {q: (m, 0.0) for q, (m, _) in fid.items()}
    untested = figure3_verdict("P@10", fid, constant)
    assert untested.reproduced == UNTESTABLE and "the end-to-end score is constant (0)" in untested.why


COST = {
    "wall": {"e2e-concat": 188.5, "e2e-fid": 81.9, "erag": 91.0},
    "cpu": {"e2e-concat": 370.0, "e2e-fid": 160.0, "erag": 180.0},
    "memory_query_level": {"e2e-concat": 482.4, "e2e-fid": 92.7, "erag": 112.5},
    "memory_document_level": 10.0,
    "decoder_positions": {"e2e-concat": 16, "e2e-fid": 16, "erag": 800},
    "params": 60_000_000,
    "device": "cpu",
}


def test_table2_judges_runtime_only_on_a_gpu_and_memory_at_both_levels():
    setting = CostSetting(queries=4, memory_queries=1, docs=20)
    cpu = cost_verdict(setting, COST)
    assert "runtime on cpu: E2E FiD time / eRAG time 0.90x (not judged)" in cpu.ours
    assert cpu.reproduced == PARTLY  # query-level heavier (0.82x), document-level lighter (9.27x)
    assert "memory, query-level: no (E2E FiD 92.7 MiB for one query against eRAG 112 MiB" in cpu.why
    assert "memory, document-level: yes (E2E FiD 92.7 MiB for one query against eRAG 10 MiB" in cpu.why
    assert "runtime" not in cpu.why  # not testable here, so not in the verdict
    lighter = cost_verdict(setting, {**COST, "memory_query_level": {**COST["memory_query_level"], "erag": 12.0}})
    assert lighter.reproduced == YES and lighter.why != cpu.why

    gpu = {**COST, "device": "NVIDIA H100 80GB HBM3", "wall": {"e2e-concat": 9.0, "e2e-fid": 6.0, "erag": 2.5}}
    on_gpu = cost_verdict(CostSetting(queries=64, batch_queries=16, repeats=3, device="cuda"), gpu)
    assert (
        on_gpu.reproduced == PARTLY
        and "runtime on NVIDIA H100 80GB HBM3: yes (eRAG 2.5 s against E2E FiD 6 s" in on_gpu.why
    )
    slower = cost_verdict(setting, {**gpu, "wall": {**gpu["wall"], "erag": 7.0}})
    assert "runtime on NVIDIA H100 80GB HBM3: no (eRAG 7 s" in slower.why


def fake_run(folder, per_labeling: dict[str, dict[str, dict]], parameters: int = 1_700_000) -> dict:
    """What `_erag` returns, with the erag_report.json `per_query` reads: {labeling: {metric: numbers}}."""
    folder.mkdir(parents=True)
    e2e = {q: y for by_metric in per_labeling.values() for rows in by_metric.values() for q, (_, y) in rows.items()}
    labelings = {
        labeling: {"per_query": {q: {m: rows[q][0] for m, rows in by_metric.items()} for q in e2e}}
        for labeling, by_metric in per_labeling.items()
    }
    (folder / "erag_report.json").write_text(json.dumps({"end_to_end": {"per_query": e2e}, "labelings": labelings}))
    return {
        "folder": str(folder),
        "end_to_end": float(np.mean(list(e2e.values()))),
        "reader": {"name": folder.name, "parameters": parameters},
        "correlation": {name: correlate(s["per_query"], e2e) for name, s in labelings.items()},
    }


def test_figure3_fixes_its_metric_before_the_readers_are_compared(tmp_path, monkeypatch):
    """MAP favours the in-prompt reader and P@10 the FiD reader: the verdict reads P@10 whichever
    reader a metric favours, because it was fixed before any reader was read."""
    fid_p = numbers(0.9, seed=1)
    ipa_p = with_e2e(fid_p, 0.1, 2)
    fid_map = with_e2e(fid_p, 0.1, 3)
    ipa_map = with_e2e(fid_p, 0.95, 4)
    runs = {
        "fid": fake_run(
            tmp_path / "fid",
            {"erag": {"MAP": fid_map, "P@10": fid_p}, "contains_answer": {"MAP": fid_p, "P@10": fid_p}},
        ),
        "ralm": fake_run(
            tmp_path / "ralm",
            {"erag": {"MAP": ipa_map, "P@10": ipa_p}, "contains_answer": {"MAP": ipa_p, "P@10": ipa_p}},
        ),
    }
    monkeypatch.setattr(erag_tables, "_erag", lambda ws, ranking, top_k, reader: runs[reader])
    result = erag_tables.figure3(Workspace(tmp_path / "out", "toy"))
    assert FIXED_METRIC.format(k=10) == "P@10"
    assert result.verdict.reproduced == YES and result.verdict.ours.startswith("eRAG (P@10) with the FiD reader")


def test_figure2_reads_smollm2_on_the_scales_questions_beside_the_generator(tmp_path, monkeypatch):
    small = numbers(0.9, seed=5)
    asked = []

    def run(ws, ranking, reader, llm, downstream, questions):
        asked.append((reader, llm, downstream, questions))
        size = 135_000_000 if llm else 1_700_000
        return fake_run(tmp_path / f"{reader}-{len(asked)}", {"erag": {"P@10": small}}, size)

    monkeypatch.setattr(erag_tables, "_erag", run)
    monkeypatch.setattr(erag_tables, "smollm2_installed", lambda: True)
    result = erag_tables.figure2(Workspace(tmp_path / "out", "quick"))
    questions = erag_tables.FIGURE2_QUESTIONS["quick"]
    assert asked == [("fid", None, "contains", questions), ("ralm", erag_tables.SMOLLM2, "contains", questions)]
    assert result.verdict.reproduced == YES  # the same numbers: a difference of exactly 0
    assert "with 135M parameters against 0." in result.verdict.why and f"{questions} questions" in result.differs


@pytest.mark.parametrize("scale", ["toy", "quick", "full"])
def test_table2_measures_on_a_gpu_with_the_papers_documents(scale):
    gpu, cpu = erag_tables.table2_setting(scale, "cuda"), erag_tables.table2_setting(scale, "cpu")
    assert gpu.device == "cuda" and cpu.device == "cpu"
    if scale != "toy":
        assert gpu.docs == 50 and gpu.batch_queries > cpu.batch_queries and gpu.repeats > 1


def _verdicts_on_two_sets_of_numbers():
    """Each eRAG table's verdict on two sets of numbers that differ only in the run's measurements."""
    erag, other = numbers(0.9), numbers(0.9, seed=9)
    contains, contains_other = with_e2e(erag, 0.2, 1), with_e2e(other, 0.5, 1)
    cost_setting = CostSetting(queries=4, memory_queries=1, docs=20)
    heavier = {**COST, "memory_query_level": {**COST["memory_query_level"], "e2e-fid": 300.0}}
    return {
        "table1": [
            table1_verdict({"BM25 lists": {"erag": {"P@10": e}, "contains_answer": {"P@10": c}}})
            for e, c in ((erag, contains), (other, contains_other))
        ],
        "table2": [cost_verdict(cost_setting, cost) for cost in (COST, heavier)],
        "figure1": [
            figure1_verdict({5: {"erag": ("P@5", e), "contains_answer": ("P@5", c)}})
            for e, c in ((erag, contains), (other, contains_other))
        ],
        "figure2": [
            figure2_verdict("P@10", {"generator": (1_700_000, e), "SmolLM2": (135e6, c)})
            for e, c in ((erag, with_e2e(erag, 0.85, 2)), (other, with_e2e(other, 0.8, 3)))
        ],
        "figure3": [figure3_verdict("P@10", e, c) for e, c in ((erag, contains), (other, contains_other))],
    }


@pytest.mark.parametrize("table", ["table1", "table2", "figure1", "figure2", "figure3"])
def test_every_erag_verdicts_reason_changes_with_its_numbers(table):
    """No fixed-string reason: the same finding on other numbers gives another reason."""
    first, second = _verdicts_on_two_sets_of_numbers()[table]
    assert first.why and second.why and first.why != second.why
    assert first.reproduced != UNTESTABLE and second.reproduced != UNTESTABLE
