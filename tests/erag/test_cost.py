"""The cost profile's accounting (`erag.cost.Meter`, `profile_run`, `packed_fid`) on a tiny random T5."""

import argparse

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from erag.cost import Meter, build_reader, packed_fid, parse_args, profile_run, synthetic_data, word_range
from erag.readers import HFReader
from tests.erag.conftest import CONTEXTS, QUESTIONS, tiny_t5

TINY = ["--d-model", "32", "--d-ff", "64", "--layers", "2", "--heads", "4", "--vocab", "200", "--max-new-tokens", "3"]


@pytest.fixture
def eager_t5():
    return tiny_t5(attn_implementation="eager")  # plain matmuls, all seen by FlopCounterMode


@pytest.mark.parametrize("fusion", ["concat", "fid"])
def test_meter_counts_tokens_and_flops(eager_t5, fusion):
    model, tokenizer = eager_t5
    reader = HFReader(model, tokenizer, max_new_tokens=4, fusion=fusion, generate_kwargs={"min_new_tokens": 4})
    with Meter(model) as meter, FlopCounterMode(display=False) as counter:
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
    args = parse_args([*TINY, "--docs", "6"])
    data = synthetic_data(args, 2, (2, 40))[0]
    erag = build_reader(args, "concat")
    unsorted = profile_run(erag, data, "erag", 4, sort=False)
    ordered = profile_run(erag, data, "erag", 4, sort=True)
    assert unsorted["rows"] == ordered["rows"] == 12
    assert unsorted["encoder_real"] == ordered["encoder_real"]
    assert ordered["encoder_tokens"] < unsorted["encoder_tokens"]
    assert ordered["decoder_positions"] == 12 * 3
    split = ordered["encoder_s"] + ordered["decoder_s"] + ordered["lm_head_s"] + ordered["other_s"]
    assert split == pytest.approx(ordered["seconds"])

    fid = build_reader(args, "fid")
    plain = profile_run(fid, data, "e2e-fid", 2)
    packed = profile_run(fid, data, "e2e-fid-packed", 2, fid_chunk=3)
    assert plain["encoder_real"] == packed["encoder_real"] == ordered["encoder_real"]  # the same 12 prompts
    assert packed["encoder_tokens"] < plain["encoder_tokens"]
    assert packed["cross_keys"] < plain["cross_keys"]  # the decoder attends to real tokens only
    questions = [r["question"] for r in data.values()]
    contexts = [r["documents"] for r in data.values()]
    with torch.inference_mode():
        assert packed_fid(fid, questions, contexts, 3) == fid(questions, contexts)


def test_stop_at_eos_lifts_min_new_tokens_for_the_run_only():
    args = parse_args(TINY)
    reader = build_reader(args, "concat")
    data = synthetic_data(args, 1, (5, 5))[0]
    profile_run(reader, data, "erag", 10, eos=True)
    assert reader.generate_kwargs == {"min_new_tokens": 3}


def test_word_range():
    assert word_range("100") == (100, 100) and word_range("20-180") == (20, 180)
    assert parse_args(["--doc-words", "7"]).doc_words == (7, 7)
    with pytest.raises(argparse.ArgumentTypeError):
        word_range("9-3")
