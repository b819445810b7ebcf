"""rerag.reproduce.erag_cost: eRAG's Table 2 measured in this process (time, and peak tensor memory
from the profiler's allocation records) on a tiny random T5."""

import pytest
import torch

from rerag.reproduce.erag_cost import MODES, CostSetting, cost_rows, measure_cost, peak_tensor_mib

TINY = CostSetting(
    d_model=32, d_ff=64, layers=1, heads=2, vocab=200, queries=2, memory_queries=1, docs=4, doc_words=(12, 12)
)


def test_peak_tensor_memory_is_the_running_peak_above_the_start():
    held_before = torch.ones(3_000_000)  # 12 MB held before: not counted, and freed inside

    def allocate():
        nonlocal held_before
        a = torch.empty(1_000_000)  # 4 MB
        b = torch.empty(2_000_000)  # 8 MB: 12 MB live, the peak
        del a
        held_before = None  # -12 MB below the start
        c = torch.empty(1_000_000)  # 4 MB
        del b, c

    assert peak_tensor_mib(allocate) == pytest.approx(12e6 / 2**20, rel=1e-3)
    assert peak_tensor_mib(lambda: None) == 0


def test_the_tiny_table_measures_every_cell_and_restores_the_threads():
    threads = torch.get_num_threads()
    cost = measure_cost(TINY)
    assert torch.get_num_threads() == threads
    assert all(cost["wall"][m] > 0 and cost["cpu"][m] > 0 for m in MODES)
    query = cost["memory_query_level"]
    # one pair's activations are smaller than one query's four documents, and than four pairs at once
    assert 0 < cost["memory_document_level"] < query["erag"]
    assert cost["memory_document_level"] < query["e2e-concat"] and cost["memory_document_level"] < query["e2e-fid"]
    assert cost["decoder_positions"] == {"e2e-concat": 2 * 8, "e2e-fid": 2 * 8, "erag": 2 * 4 * 8}
    rows = cost_rows(TINY, cost)
    assert [r[0] for r in rows] == [
        "runtime, wall (E2E 2 queries/batch, eRAG 8 pairs)",
        "runtime, CPU (E2E 2 queries/batch, eRAG 8 pairs)",
        "memory query-level (E2E 1 query, eRAG 4 pairs)",
        "memory document-level (E2E 1 query, eRAG 1 pair)",
    ]
    fid_over_erag = query["e2e-fid"] / cost["memory_document_level"]
    assert rows[3][5] == f"{fid_over_erag:.2f}x"
