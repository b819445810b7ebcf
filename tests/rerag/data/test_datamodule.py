import random

import pytest

from rerag.data.datamodule import RERAGDataModule, sample_deep_contexts

CTXS = [{"id": str(j), "has_answer": j in (0, 2, 40)} for j in range(100)]


def test_deep_sampling_keeps_the_top_ranks_and_adds_deeper_ones_in_order():
    for seed in range(20):
        got = sample_deep_contexts(CTXS, 4, 6, None, random.Random(seed))
        assert got[:4] == CTXS[:4]  # the top n, and so their positives, are never dropped
        deep = [int(c["id"]) for c in got[4:]]
        assert len(deep) == 6 and deep == sorted(deep) and all(4 <= j < 100 for j in deep)
    assert all(int(c["id"]) < 30 for c in sample_deep_contexts(CTXS, 4, 6, 30, random.Random(0))[4:])


def test_deep_sampling_is_deterministic_by_seed():
    draw = [[c["id"] for c in sample_deep_contexts(CTXS, 4, 6, None, random.Random(s))] for s in (1, 1, 2)]
    assert draw[0] == draw[1] and draw[0] != draw[2]


def test_training_batches_hold_top_and_deep_contexts_reproducibly(data_kwargs):
    kwargs = {**data_kwargs, "train_file": data_kwargs["val_file"], "n_train_contexts": 3, "n_deep_contexts": 2}

    def first_batch(epoch):
        data = RERAGDataModule(**kwargs)
        data.setup("fit")
        loader = data.train_dataloader()
        loader.sampler.set_epoch(epoch)
        return next(iter(loader))

    a, b, c = first_batch(0), first_batch(0), first_batch(1)
    assert a["n_contexts"].tolist() == [5] * len(a["ids"])
    assert a["contexts"] == b["contexts"]
    assert a["contexts"] != c["contexts"]


def test_too_few_contexts_for_deep_sampling_is_a_clear_error(data_kwargs):
    data = RERAGDataModule(**{**data_kwargs, "n_train_contexts": 4, "n_deep_contexts": 2})
    with pytest.raises(ValueError, match=r"record id train-0: field 'ctxs': has 4 contexts.*= 6"):
        data.setup("fit")
