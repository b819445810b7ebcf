"""RERAGDataModule: FiD-format files in, [B, K] tokenized (question, context) pairs out.

Training batches hold the top `n_train_contexts` contexts of each question, plus
`n_deep_contexts` drawn from deeper ranks (up to `deep_context_depth`) when asked, tokenized for the
RE and for the generator (right-padded prompts, in the chat template when a tokenizer has one), and one gold answer sampled per question and epoch. Evaluation
batches hold up to `n_eval_contexts` contexts per question, flattened, with their counts.
`rerag.demo.DemoDataModule` is this with the synthetic world written by `prepare_data`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from functools import partial

import lightning as L
import pyarrow.compute as pc
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from erag.answers import has_answer
from erag.lm import encode_answers, encode_prompts, load_tokenizer
from rerag.data.dataset import load_fid_dataset
from rerag.defaults import EVAL_CONTEXTS, TRAIN_CONTEXTS
from rerag.inputs import InputSpec, format_pairs, window_rows


def sample_deep_contexts(
    ctxs: list[dict], n_top: int, n_deep: int, depth: int | None, rng: random.Random
) -> list[dict]:
    """The top `n_top` contexts, always, then `n_deep` drawn without replacement from ranks
    n_top..depth (None: every rank the record holds), in rank order. Training on a few deep
    contexts shows the RE what evaluation over the top 100 shows it; no label picks them (the RE
    learns from the generator alone), and the top ranks, where the answers mostly are, stay."""
    deep = range(n_top, min(len(ctxs), depth or len(ctxs)))
    picked = sorted(rng.sample(deep, min(n_deep, len(deep))))
    return ctxs[:n_top] + [ctxs[j] for j in picked]


def word_window(context: dict, n_words: int, rng: random.Random, answers: Sequence[str] = ()) -> dict:
    """`context` with its text cut to `n_words` consecutive words at a random offset (unchanged when
    shorter). Cutting every training context to one length takes away a shortcut: where the gold
    passage is more often the longest of the retriever's top k in training than in dev and test,
    an RE learns "longest is relevant". By default the teacher
    reads the same window, so its F_ij says whether the window holds the answer: no label is used.

    With `answers` (`data.init_args.train_windows_keep_answer`), a passage that holds one of the
    question's answers (`erag.answers.has_answer`) is cut at an offset drawn among those whose window
    still holds it, so a teacher reading the whole passage never points at a window that lost the
    answer; other passages are cut at any offset."""
    words = context["text"].split()
    if len(words) <= n_words:
        return context
    starts = range(len(words) - n_words + 1)
    if answers and has_answer(context["text"], answers):  # none keeps an answer longer than the window
        starts = [i for i in starts if has_answer(" ".join(words[i : i + n_words]), answers)] or starts
    start = rng.choice(starts)
    return context | {"text": " ".join(words[start : start + n_words])}


def first_rows(counts: torch.Tensor, depth: int) -> list[torch.Tensor]:
    """Per question, the flattened rows of its first `depth` contexts (`counts`: each question's contexts)."""
    starts = (torch.cumsum(counts, 0) - counts).tolist()
    return [
        torch.arange(start, start + min(n, depth), device=counts.device) for start, n in zip(starts, counts.tolist())
    ]


def first_contexts(batch: dict, depth: int) -> tuple[dict, torch.Tensor]:
    """An evaluation batch cut to the retriever's first `depth` contexts of each question (the
    flattened rows, their counts, every per-context field, and the RE's windows of the kept
    contexts), as if collated with `n_eval_contexts = depth`, and the kept rows' positions in the
    flattened input."""
    counts = batch["n_contexts"]
    rows = torch.cat(first_rows(counts, depth))
    per_row = {name: batch[name][rows] for name in ("retriever_scores", "has_answer", "gold") if name in batch}
    encoded = {name: {key: value[rows] for key, value in batch[name].items()} for name in ("re", "gen")}
    if "re_window_of" in batch:  # the RE's rows are windows: keep those of the kept contexts, renumbered
        window_of = batch["re_window_of"]
        kept = torch.isin(window_of, rows.to(window_of.device))
        renumber = torch.full((len(batch["retriever_scores"]),), -1, dtype=torch.long, device=window_of.device)
        renumber[rows.to(window_of.device)] = torch.arange(len(rows), device=window_of.device)
        encoded["re"] = {key: value[kept] for key, value in batch["re"].items()}
        per_row["re_window_of"] = renumber[window_of[kept]]
    return batch | per_row | encoded | {
        "contexts": [cs[:depth] for cs in batch["contexts"]],
        "n_contexts": counts.clamp(max=depth),
    }, rows


class _Questions(Dataset):
    """Records of one split; `epoch` seeds the training answer sample and the deep contexts
    (`sample_deep_contexts`, when `n_deep` > 0), so a resumed run draws what an uninterrupted one
    draws."""

    def __init__(
        self,
        records,
        seed: int,
        n_top: int | None = None,
        n_deep: int = 0,
        depth: int | None = None,
        window: int | None = None,
        window_generator: bool = True,
        window_keeps_answer: bool = False,
    ):
        self.records, self.seed, self.epoch = records, seed, 0
        self.n_top, self.n_deep, self.depth, self.window = n_top, n_deep, depth, window
        self.window_generator, self.window_keeps_answer = window_generator, window_keeps_answer

    def windowed(self, record: dict, contexts: list[dict]) -> list[dict]:
        """`contexts` cut to `window` words (`word_window`), each at an offset fixed by the seed, the
        question and the context, so every epoch (and the teacher cache) sees the same text."""
        if self.window is None:
            return contexts
        answers = record["answers"] if self.window_keeps_answer else ()
        return [
            word_window(c, self.window, random.Random(f"{self.seed}:{record['id']}:{c['id']}"), answers)
            for c in contexts
        ]

    def drawable_contexts(self, i: int) -> list[dict]:
        """Every context training may show the generator with question `i`, in any epoch: the top
        `n_top` and, with `n_deep`, every rank that `sample_deep_contexts` draws from; windowed as the
        generator (and so the teacher) reads them."""
        ctxs = self.records[i]["ctxs"]
        end = (self.depth or len(ctxs)) if self.n_deep else self.n_top
        return self.windowed(self.records[i], ctxs[:end]) if self.window_generator else ctxs[:end]

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> dict:
        return self.draw(i, self.epoch)

    def draw(self, i: int, epoch: int) -> dict:
        """Question `i` as epoch `epoch` shows it: its sampled answer (`target`) and, in training, its
        contexts (`sample_deep_contexts`, windowed)."""
        record = dict(self.records[i])
        record["index"] = i  # the question's position in its split: an integer key unique across processes
        rng = random.Random(f"{self.seed}:{epoch}:{i}")
        record["target"] = rng.choice(record["answers"]) if record["answers"] else ""
        if self.n_deep:
            record["ctxs"] = sample_deep_contexts(record["ctxs"], self.n_top, self.n_deep, self.depth, rng)
        if self.n_top is not None:  # training
            contexts = record["ctxs"][: self.n_top + self.n_deep]
            record["re_ctxs"] = self.windowed(record, contexts)
            record["ctxs"] = record["re_ctxs"] if self.window_generator else contexts
        return record


class EpochShuffleSampler(Sampler[int]):
    """A new permutation each epoch from (seed, epoch): reproducible across resumes. `done()` says
    how many of the epoch's questions training has already taken (non-zero only when a run resumes
    mid-epoch: Lightning restarts a loader's epoch from its first batch), and those are skipped."""

    def __init__(self, dataset: _Questions, seed: int, done: Callable[[], int] = lambda: 0):
        self.dataset, self.seed, self.epoch, self.done = dataset, seed, 0, done

    def set_epoch(self, epoch: int) -> None:
        self.epoch = self.dataset.epoch = epoch

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return iter(torch.randperm(len(self.dataset), generator=g).tolist()[self.done() :])


#: The splits each trainer stage reads.
STAGE_SPLITS = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("predict",)}


class RERAGDataModule(L.LightningDataModule):
    def __init__(
        self,
        train_file: str | None = None,
        val_file: str | None = None,
        test_file: str | None = None,
        predict_file: str | None = None,
        inputs: InputSpec = InputSpec(),
        re_trust_remote_code: bool = False,
        generator_trust_remote_code: bool = False,
        n_train_contexts: int = TRAIN_CONTEXTS,
        n_deep_contexts: int = 0,
        deep_context_depth: int | None = None,
        n_eval_contexts: int = EVAL_CONTEXTS,
        train_context_words: int | None = None,
        train_windows_keep_answer: bool = False,
        window_generator_contexts: bool = True,
        eval_context_words: int | None = None,
        batch_size: int = 4,
        eval_batch_size: int = 4,
        num_workers: int = 0,
        seed: int = 0,
        skip_invalid: bool = False,
    ):
        """FiD-format files in, tokenized (question, context) batches out.

        Args:
            train_file: FiD JSON or JSONL for training (top-20 contexts in the paper).
            val_file: FiD file for validation (top-100 contexts).
            test_file: FiD file for testing (top-100 contexts).
            predict_file: FiD file of questions for `rerag predict` (answers optional).
            inputs: the models' text settings: tokenizers, templates, lengths (linked from model.inputs by
                the CLI, so declared once).
            re_trust_remote_code: load the RE's tokenizer with its folder's code (linked from
                model.estimator.trust_remote_code).
            generator_trust_remote_code: the same for the generator's tokenizer (linked from the spec the
                generator is built from: model.estimator with shared_base, else model.generator).
            n_train_contexts: the retriever's top contexts per training question (paper 20); at least 1.
            n_deep_contexts: plus this many drawn from ranks n_train_contexts..deep_context_depth; at least 0.
            deep_context_depth: how deep the deep contexts are drawn from (None: every rank a record holds).
            n_eval_contexts: contexts per dev and test question (paper 100); at least 1.
            train_context_words: cut each training context to a window of this many words (None: whole passages);
                a cure for a length shortcut in the RE.
            train_windows_keep_answer: a training context that holds one of the question's answers is
                cut to a window that still holds it (`word_window`): the question-answer pair places the
                window, no `gold` or `has_answer` field is read and no label reaches the loss.
            window_generator_contexts: the generator (and a frozen teacher) reads the same windows as the
                RE; False: it reads whole passages, so L_gen always has the evidence the window may cut.
            eval_context_words: the RE scores each dev, test and predict passage by its best window of
                this many words (`rerag.inputs.passage_windows`, stride half a window; MaxP) instead of
                whole (None); the generator still reads whole passages. Set it to `train_context_words`:
                an RE trained on windows of one length then sees that length at evaluation too.
            batch_size: questions per training batch; at least 1.
            eval_batch_size: questions per evaluation batch; at least 1.
            num_workers: DataLoader worker processes.
            seed: the data order, the answer sampled per epoch and the training windows.
            skip_invalid: skip (and count) malformed records instead of failing.
        """
        super().__init__()
        self.save_hyperparameters()
        for field, minimum in (
            ("n_train_contexts", 1),
            ("n_eval_contexts", 1),
            ("n_deep_contexts", 0),
            ("batch_size", 1),
            ("eval_batch_size", 1),
            ("train_context_words", 1),
            ("eval_context_words", 2),
        ):
            value = self.hparams[field]
            if value is not None and value < minimum:
                raise ValueError(f"data.init_args.{field}: must be at least {minimum}, got {value}")
        if train_windows_keep_answer and train_context_words is None:
            raise ValueError("data.init_args.train_windows_keep_answer: needs train_context_words (the window)")
        self.inputs = inputs
        self.train_file, self.val_file, self.test_file = train_file, val_file, test_file
        self.predict_file = predict_file
        self._splits: dict[str, _Questions] = {}

    def split_files(self, stage: str) -> dict[str, str]:
        """The FiD file of each split `stage` reads ("fit": train and val, "validate", "test", "predict")."""
        stage = str(getattr(stage, "value", stage))
        files = {}
        for split in STAGE_SPLITS[stage]:
            path = getattr(self, f"{split}_file")
            if path is None:
                if (stage, split) == ("fit", "val"):
                    continue  # fitting without validation
                raise ValueError(f"stage '{stage}' needs data.init_args.{split}_file")
            files[split] = path
        return files

    def _load(self, split: str, path: str):
        return load_fid_dataset(path, require_answers=split != "predict", skip_invalid=self.hparams.skip_invalid)

    def prepare_data(self) -> None:
        """Validate the files the trainer's stage reads and write their Arrow caches, once per node:
        Lightning calls this in each node's first process before any process's `setup`, which then
        memory-maps the cache instead of decoding the file again in every process."""
        if self.trainer is not None:
            for split, path in self.split_files(self.trainer.state.fn).items():
                self._load(split, path)

    def setup(self, stage: str) -> None:
        hp, inputs = self.hparams, self.inputs
        self.re_tok = load_tokenizer(inputs.re_tokenizer, hp.re_trust_remote_code)
        self.gen_tok = load_tokenizer(inputs.generator_tokenizer, hp.generator_trust_remote_code)
        for split, path in self.split_files(stage).items():
            records = self._load(split, path)
            if split == "train":
                k = hp.n_train_contexts + hp.n_deep_contexts
                # Counted in Arrow, not by decoding every record's passages: setup stays quick on a large file.
                counts = pc.list_value_length(records.with_format("arrow")["ctxs"])
                short = pc.less(counts, k)
                if pc.any(short).as_py():
                    i = pc.index(short, True).as_py()
                    raise ValueError(
                        f"{path}: record id {records[i]['id']}: field 'ctxs': has {counts[i].as_py()} "
                        f"contexts, training needs n_train_contexts + n_deep_contexts = {k}"
                    )
                self._splits[split] = _Questions(
                    records,
                    hp.seed,
                    hp.n_train_contexts,
                    hp.n_deep_contexts,
                    hp.deep_context_depth,
                    hp.train_context_words,
                    hp.window_generator_contexts,
                    hp.train_windows_keep_answer,
                )
            else:
                self._splits[split] = _Questions(records, self.hparams.seed)

    def records(self, split: str) -> Sequence[dict]:
        """The validated records of a split loaded by `setup` ("train", "val", "test", "predict")."""
        return self._splits[split].records

    def teacher_triple_settings(self) -> dict:
        """The settings that decide which triples `teacher_triples` yields (part of the teacher cache's key)."""
        hp = self.hparams
        names = ("n_train_contexts", "n_deep_contexts", "deep_context_depth", "train_context_words", "seed")
        settings = {name: hp[name] for name in names}
        if not hp.window_generator_contexts:
            settings["train_context_words"] = None  # the teacher reads whole passages: a whole-passage run's triples
        if hp.train_windows_keep_answer and hp.window_generator_contexts:  # the teacher reads these windows
            settings["train_windows_keep_answer"] = True
        return settings

    def teacher_triples(self, epochs: int | None = None) -> Iterator[tuple[str, str, dict]]:
        """The (question, answer, context) triples that training shows in its first `epochs` epochs,
        each context as training shows it to the generator: what a frozen teacher scores once
        (`rerag.teacher_cache`). Each epoch draws one answer and the deep contexts per question
        (`_Questions.draw`), so a few epochs show a fraction of what they may draw from.
        None: every triple that any epoch may show (each answer with every context it may draw)."""
        questions = self._splits["train"]
        if epochs is not None:
            for epoch, i in itertools.product(range(epochs), range(len(questions))):
                record = questions.draw(i, epoch)
                for context in record["ctxs"]:
                    yield record["question"], record["target"], context
            return
        for i, record in enumerate(questions.records):
            for answer in dict.fromkeys(record["answers"]):
                for context in questions.drawable_contexts(i):
                    yield record["question"], answer, context

    def _collate(self, records: list[dict], k: int) -> dict:
        """A batch; `gold` (the context holds the question's own answer span) only when every
        context of the batch says (SQuAD-built files do; retrieval-only data does not)."""
        hp, inputs = self.hparams, self.inputs
        ctxs = [r["ctxs"][:k] for r in records]
        questions = [r["question"] for r, cs in zip(records, ctxs) for _ in cs]
        flat = [c for cs in ctxs for c in cs]
        re_flat = [c for r in records for c in r.get("re_ctxs", r["ctxs"])[:k]]  # training windows, if any
        gold = [c.get("gold") for c in flat]
        re_questions = questions
        extra = {"gold": torch.tensor(gold, dtype=torch.bool)} if flat and None not in gold else {}
        if hp.eval_context_words and "re_ctxs" not in records[0]:  # evaluation: the RE reads windows
            re_flat, window_of = window_rows(flat, hp.eval_context_words)
            re_questions = [questions[j] for j in window_of]
            extra["re_window_of"] = torch.tensor(window_of, dtype=torch.long)  # the flattened context of each RE row
        return {
            "ids": [r["id"] for r in records],
            "index": torch.tensor([r["index"] for r in records]),
            "questions": [r["question"] for r in records],
            "answers": [r["answers"] for r in records],
            "targets": [r["target"] for r in records],
            "contexts": ctxs,
            "n_contexts": torch.tensor([len(cs) for cs in ctxs]),
            "re": encode_prompts(
                self.re_tok, format_pairs(inputs.re_template, re_questions, re_flat), inputs.re_max_length
            ),
            "gen": encode_prompts(
                self.gen_tok, format_pairs(inputs.generator_template, questions, flat), inputs.generator_max_length
            ),
            "labels": encode_answers(self.gen_tok, [r["target"] for r in records], inputs.max_answer_length),
            "retriever_scores": torch.tensor([c["score"] for c in flat], dtype=torch.float32),
            "has_answer": torch.tensor([c["has_answer"] for c in flat], dtype=torch.bool),
        } | extra

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        hp = self.hparams
        data = self._splits[split]
        k = hp.n_train_contexts + hp.n_deep_contexts if split == "train" else hp.n_eval_contexts
        return DataLoader(
            data,
            batch_size=hp.batch_size if split == "train" else hp.eval_batch_size,
            sampler=EpochShuffleSampler(data, hp.seed, self._questions_done) if shuffle else None,
            collate_fn=partial(self._collate, k=k),
            num_workers=hp.num_workers,
            drop_last=split == "train",
        )

    def _questions_done(self) -> int:
        """The questions of the current epoch that training has taken, over every process: Lightning's
        count of the epoch's batches (restored with the checkpoint when a run resumes). Zero outside
        a fit's training, so a loader iterated by hand after fit gives the whole epoch."""
        trainer = self.trainer
        if trainer is None or not trainer.training:
            return 0
        batches = trainer.fit_loop.epoch_loop.batch_progress.current.ready
        return batches * self.hparams.batch_size * trainer.world_size

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader | list:
        return self._loader("val", shuffle=False) if "val" in self._splits else []

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("predict", shuffle=False)
