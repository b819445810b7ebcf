import dataclasses
import random

import pytest
import torch

from erag.answers import has_answer
from rerag.data.datamodule import RERAGDataModule, first_contexts, sample_deep_contexts, word_window
from rerag.inputs import passage_windows
from tests.rerag.conftest import train

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


def test_the_teacher_triples_of_n_epochs_are_what_those_epochs_train_on(data_kwargs):
    kwargs = {**data_kwargs, "train_file": data_kwargs["val_file"], "n_train_contexts": 3, "n_deep_contexts": 2}
    data = RERAGDataModule(**kwargs)
    data.setup("fit")
    loader, shown = data.train_dataloader(), set()
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for batch in loader:
            shown |= {
                (q, t, c["id"]) for q, t, cs in zip(batch["questions"], batch["targets"], batch["contexts"]) for c in cs
            }

    def triples(epochs):
        return {(q, a, c["id"]) for q, a, c in data.teacher_triples(epochs)}

    assert triples(2) == shown
    assert triples(1) < triples(2) < triples(None)  # None: every answer with every context an epoch may draw


def test_too_few_contexts_for_deep_sampling_is_a_clear_error(data_kwargs):
    data = RERAGDataModule(**{**data_kwargs, "n_train_contexts": 4, "n_deep_contexts": 2})
    with pytest.raises(ValueError, match=r"record id train-0: field 'ctxs': has 4 contexts.*= 6"):
        data.setup("fit")


def test_a_window_keeps_the_answer_of_a_passage_that_holds_it():
    words = [f"w{i}" for i in range(40)]
    words[3:5] = ["Marie", "Curie"]  # near the start: most 10-word windows lose it
    context = {"id": "c", "text": " ".join(words)}
    lost = 0
    for seed in range(50):
        kept = word_window(context, 10, random.Random(seed), answers=["Marie Curie"])
        assert len(kept["text"].split()) == 10 and has_answer(kept["text"], ["Marie Curie"])
        lost += not has_answer(word_window(context, 10, random.Random(seed))["text"], ["Marie Curie"])
    assert lost > 25  # without the answer the offset is anywhere
    # A passage without the answer, or an answer longer than the window, is cut anywhere.
    assert word_window(context, 10, random.Random(0), answers=["Pierre"]) == word_window(context, 10, random.Random(0))
    assert len(word_window(context, 1, random.Random(0), answers=["Marie Curie"])["text"].split()) == 1


def test_answer_keeping_windows_need_a_window_and_change_the_cache_key_only_when_the_teacher_reads_them(data_kwargs):
    with pytest.raises(ValueError, match="train_windows_keep_answer: needs train_context_words"):
        RERAGDataModule(**data_kwargs, train_windows_keep_answer=True)
    keys = {
        (keep, windowed_teacher): RERAGDataModule(
            **data_kwargs,
            train_context_words=5,
            train_windows_keep_answer=keep,
            window_generator_contexts=windowed_teacher,
        ).teacher_triple_settings()
        for keep in (False, True)
        for windowed_teacher in (False, True)
    }
    assert keys[False, False] == keys[True, False]
    assert keys[False, True] != keys[True, True]
    data = RERAGDataModule(**data_kwargs, train_context_words=4, train_windows_keep_answer=True)
    data.setup("fit")
    questions, checked = data._splits["train"], 0
    for i in range(len(questions)):
        item = questions[i]
        for whole, window in zip(questions.records[i]["ctxs"], item["re_ctxs"]):
            if has_answer(whole["text"], item["answers"]) and len(whole["text"].split()) > 4:
                checked += 1
                assert has_answer(window["text"], item["answers"])
    assert checked > 0


def test_evaluation_batches_give_the_re_windows_and_the_generator_whole_passages(data_kwargs):
    whole = RERAGDataModule(**data_kwargs)
    windowed = RERAGDataModule(**data_kwargs, train_context_words=4, eval_context_words=8)
    for data in (whole, windowed):
        data.setup("fit")
    a, b = next(iter(whole.val_dataloader())), next(iter(windowed.val_dataloader()))
    flat = [c for cs in b["contexts"] for c in cs]
    expected = [(j, w["text"]) for j, c in enumerate(flat) for w in passage_windows(c, 8)]
    assert b["re_window_of"].tolist() == [j for j, _ in expected] and len(expected) > len(flat)
    assert b["re"]["input_ids"].shape[0] == len(expected)
    for key in ("input_ids", "attention_mask"):  # the generator reads the same whole passages
        assert torch.equal(a["gen"][key], b["gen"][key])
    decoded = windowed.re_tok.decode(b["re"]["input_ids"][1], skip_special_tokens=True)
    assert expected[1][1].split()[-1].strip(".,") in decoded
    assert "re_window_of" not in next(iter(windowed.train_dataloader()))  # training keeps its own windows
    with pytest.raises(ValueError, match="eval_context_words: must be at least 2"):
        RERAGDataModule(**data_kwargs, eval_context_words=1)


def test_the_batches_text_is_the_input_specs(data_kwargs):
    """`inputs` (the models' `InputSpec`) sets each model's template and input length, and the answers' length."""
    inputs = dataclasses.replace(
        data_kwargs["inputs"],
        re_template="rerank {question} in {text}",
        generator_template="answer {question} from {text}",
        re_max_length=12,
        generator_max_length=20,
        max_answer_length=3,
    )
    data = RERAGDataModule(**{**data_kwargs, "inputs": inputs})
    assert data.inputs is inputs
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    assert batch["re"]["input_ids"].shape[1] <= 12 and batch["gen"]["input_ids"].shape[1] <= 20
    assert batch["labels"].shape[1] <= 3
    re_text = data.re_tok.decode(batch["re"]["input_ids"][0], skip_special_tokens=True)
    gen_text = data.gen_tok.decode(batch["gen"]["input_ids"][0], skip_special_tokens=True)
    assert re_text.split()[0] == "rerank" and gen_text.split()[0] == "answer"


def test_a_batch_cut_to_its_first_contexts_keeps_their_windows():
    batch = {
        "n_contexts": torch.tensor([3, 2]),
        "contexts": [["a", "b", "c"], ["d", "e"]],
        "retriever_scores": torch.arange(5.0),
        "re": {"input_ids": torch.arange(9)[:, None]},  # one row per window
        "gen": {"input_ids": torch.arange(5)[:, None]},
        "re_window_of": torch.tensor([0, 0, 1, 2, 2, 2, 3, 4, 4]),
    }
    cut, rows = first_contexts(batch, 1)
    assert rows.tolist() == [0, 3] and cut["contexts"] == [["a"], ["d"]]
    assert cut["re"]["input_ids"][:, 0].tolist() == [0, 1, 6]  # context 0's two windows, context 3's one
    assert cut["re_window_of"].tolist() == [0, 0, 1] and cut["gen"]["input_ids"][:, 0].tolist() == [0, 3]


def test_a_run_resumed_mid_epoch_trains_on_the_questions_an_uninterrupted_run_would(
    module_kwargs, data_kwargs, tmp_path
):
    """Lightning restarts a loader's epoch from its first batch on resume; the sampler skips what the
    checkpoint's step had taken, so the resumed run's batches are the rest of the uninterrupted run's,
    into the next epoch (48 questions, 4 a batch: 12 batches an epoch)."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    from rerag.module import RERAGModule

    class Record(L.Callback):
        def __init__(self):
            self.seen = []

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.seen.append((trainer.current_epoch, batch_idx, tuple(batch["questions"])))

    def run(out, ckpt_path=None):
        L.seed_everything(0)
        record = Record()
        checkpoints = ModelCheckpoint(
            dirpath=tmp_path / "ckpt", every_n_train_steps=5, save_top_k=-1, filename="{step}"
        )
        train(RERAGModule(**module_kwargs), data_kwargs, tmp_path / out, 16, [record, checkpoints], ckpt_path=ckpt_path)
        return record.seen

    uninterrupted = run("a")
    resumed = run("b", ckpt_path=str(tmp_path / "ckpt" / "step=5.ckpt"))
    assert [(epoch, i) for epoch, i, _ in uninterrupted][11:13] == [(0, 11), (1, 0)]
    assert resumed == uninterrupted[5:]


def test_a_train_loader_iterated_after_fit_gives_the_whole_epoch(module_kwargs, data_kwargs, tmp_path):
    """Only a fit skips the epoch's questions taken before a resume: after a fit stopped mid-epoch
    (5 of 12 batches), the train loader iterated by hand gives all 12."""
    from rerag.module import RERAGModule

    data = train(RERAGModule(**module_kwargs), data_kwargs, tmp_path, steps=5).trainer.datamodule
    assert data.trainer.fit_loop.epoch_loop.batch_progress.current.ready == 5
    assert len(list(data.train_dataloader())) == 12


def test_a_stage_without_its_data_file_names_the_config_field(data_kwargs):
    data = RERAGDataModule(**{**data_kwargs, "test_file": None})
    with pytest.raises(ValueError, match=r"stage 'test' needs data\.init_args\.test_file"):
        data.setup("test")


def test_prepare_data_caches_the_stages_files_so_that_setup_decodes_none(data_kwargs, tmp_path, monkeypatch):
    """Lightning calls `prepare_data` in one process per node: it validates and caches the files the
    stage reads, and every process's `setup` reads the Arrow cache without decoding a file."""
    import shutil

    import lightning as L
    from lightning.pytorch.trainer.states import TrainerFn

    import rerag.data.dataset as dataset

    for name in ("train_file", "val_file", "test_file"):  # fresh copies: nothing of them cached yet
        shutil.copy(data_kwargs[name], tmp_path / f"{name}.jsonl")
    data = RERAGDataModule(
        **{**data_kwargs, **{n: str(tmp_path / f"{n}.jsonl") for n in ("train_file", "val_file", "test_file")}}
    )
    decoded = []
    read_fid = dataset.read_fid
    monkeypatch.setattr(dataset, "read_fid", lambda path, **kw: decoded.append(path) or read_fid(path, **kw))
    data.trainer = L.Trainer(logger=False, enable_checkpointing=False)
    data.trainer.state.fn = TrainerFn.FITTING
    data.prepare_data()
    assert sorted(decoded) == sorted(str(tmp_path / f"{n}.jsonl") for n in ("train_file", "val_file"))
    decoded.clear()
    data.setup("fit")
    assert decoded == [] and len(data.records("train")) > 0
