"""benchmarks/erag_cost.py: the cost profile's accounting (`Meter`, `profile_run`, `packed_fid`) on a
tiny random T5, and one configuration measured in a fresh process."""

import argparse
import importlib.util
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from erag.readers import HFReader
from rerag.reproduce.erag_cost import build_reader, synthetic_data
from tests.erag.conftest import CONTEXTS, QUESTIONS, tiny_t5

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "erag_cost.py"
spec = importlib.util.spec_from_file_location("erag_cost", SCRIPT)
erag_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(erag_cost)

TINY = ["--d-model", "32", "--d-ff", "64", "--layers", "2", "--heads", "4", "--vocab", "200", "--max-new-tokens", "3"]


def setting(*argv: str):
    return erag_cost.cost_setting(erag_cost.parse_args([*TINY, *argv]))


@pytest.fixture
def eager_t5():
    return tiny_t5(attn_implementation="eager")  # plain matmuls, all seen by FlopCounterMode


@pytest.mark.parametrize("fusion", ["concat", "fid"])
def test_meter_counts_tokens_and_flops(eager_t5, fusion):
    model, tokenizer = eager_t5
    reader = HFReader(model, tokenizer, max_new_tokens=4, fusion=fusion, generate_kwargs={"min_new_tokens": 4})
    with erag_cost.Meter(model) as meter, FlopCounterMode(display=False) as counter:
        reader(QUESTIONS, CONTEXTS)
    assert "generate" not in vars(model)  # the wrapper is gone again
    if fusion == "fid":
        prompts = [reader.prompt(q, d) for q, docs in zip(QUESTIONS, CONTEXTS) for d in docs]
    else:
        prompts = [reader.prompt(q, reader.context_separator.join(docs)) for q, docs in zip(QUESTIONS, CONTEXTS)]
    lengths = [len(ids) for ids in tokenizer(prompts).input_ids]
    c = meter.counts
    assert (c["encoder_rows"], c["encoder_real"]) == (len(prompts), sum(lengths))
    assert c["encoder_tokens"] == len(prompts) * max(lengths) > c["encoder_real"]
    assert c["decoder_positions"] == len(QUESTIONS) * 4 and c["after_eos"] == 0
    assert c["flops_encoder"] + c["flops_decoder"] == counter.get_total_flops()
    assert all(seconds > 0 for seconds in meter.seconds.values())


def test_sorted_batches_pad_less_and_packed_fid_agrees():
    tiny = setting("--docs", "6")
    data = synthetic_data(tiny, 2, (2, 40))[0]
    erag = build_reader(tiny, "concat")
    unsorted = erag_cost.profile_run(erag, data, "erag", 4, sort=False)
    ordered = erag_cost.profile_run(erag, data, "erag", 4, sort=True)
    assert unsorted["rows"] == ordered["rows"] == 12
    assert unsorted["encoder_real"] == ordered["encoder_real"]
    assert ordered["encoder_tokens"] < unsorted["encoder_tokens"]
    assert ordered["decoder_positions"] == 12 * 3
    # the hooked parts run one after another inside the run: what is left for the rest is not negative
    assert ordered["other_s"] >= 0 and ordered["other_cpu_s"] >= 0

    fid = build_reader(tiny, "fid")
    plain = erag_cost.profile_run(fid, data, "e2e-fid", 2)
    packed = erag_cost.profile_run(fid, data, "e2e-fid-packed", 2, fid_chunk=3)
    assert plain["encoder_real"] == packed["encoder_real"] == ordered["encoder_real"]  # the same 12 prompts
    assert packed["encoder_tokens"] < plain["encoder_tokens"]
    # the reader's own FiD packs each query's real tokens too (`erag.lm.fused_encoder_inputs`)
    assert packed["cross_keys"] == plain["cross_keys"]
    questions = [r["question"] for r in data.values()]
    contexts = [r["documents"] for r in data.values()]
    with torch.inference_mode():
        assert erag_cost.packed_fid(fid, questions, contexts, 3) == fid(questions, contexts)


def test_stop_at_eos_lifts_min_new_tokens_for_the_run_only():
    tiny = setting()
    reader = build_reader(tiny, "concat")
    data = synthetic_data(tiny, 1, (5, 5))[0]
    erag_cost.profile_run(reader, data, "erag", 10, eos=True)
    assert reader.generate_kwargs == {"min_new_tokens": 3}


def test_word_range():
    assert erag_cost.word_range("100") == (100, 100) and erag_cost.word_range("20-180") == (20, 180)
    assert erag_cost.parse_args(["--doc-words", "7"]).doc_words == (7, 7)
    with pytest.raises(argparse.ArgumentTypeError):
        erag_cost.word_range("9-3")


@pytest.mark.slow
def test_a_configuration_runs_in_a_fresh_process():
    argv = [*TINY, "--docs", "3", "--doc-words", "5", "--threads", "1"]
    cell = erag_cost.measure(argv, "erag", 3, 1)
    params = sum(p.numel() for p in build_reader(setting("--docs", "3"), "concat").model.parameters())
    assert cell["params"] == params and cell["seconds"] > 0 and cell["memory_mib"] >= 0
