"""The frozen teacher's answer likelihoods, computed once and kept on disk.

An RE trained against a frozen teacher (a stage with `re_learns_from: teacher`, `rerag.stages`) needs from it only
F_ij = log P_G(a_i | q_i, c_j) (eq. 8) for every (question, answer, context) that training draws in
its epochs (`RERAGDataModule.teacher_triples`): the teacher's
distribution Q_G = softmax_j(F_ij) that L_re distils (eq. 9-10) and the F that L_gen marginalizes
(eq. 7). `build_teacher_scores` computes them once, in batches of one passage's rows, and `TeacherScores`
keeps them in `<cache_dir>/<key>.pt`. The key is a hash of everything that decides them: the teacher
(its name, its weights and the prompt it reads: template, lengths), the training file's bytes and the
data settings that pick the training contexts (`teacher_triple_settings`) and the number of epochs, so
a changed teacher, data file, prompt, context choice or epoch count builds a new file and an unchanged
one is read back.

Under DDP every process builds a share of the cache (`build_in_shares`): the distinct rows, grouped and
batched as one process would (a batch holds one context's rows), are cut into one contiguous run of
batches per process, balanced by the characters each reads; each process scores its run and writes
it as its own file beside the cache (`CacheShares`), notes its progress while it scores, and reads
every process's share once all are on disk, so every process holds the same complete cache, equal entry
for entry to one process's build (the same batches). Rank zero writes the merged `<key>.pt` and removes
the shares. No process waits in a collective while another scores (a build longer than the process
group's timeout would end the run): each watches the folder, and gives up only where a missing share's
process has shown no progress for `TeacherSpec.share_timeout` seconds. A build stopped midway resumes:
a share found on disk is read, not scored again (same key, same number of processes).

With a `question_template` the teacher scores the question too: F_ij = log P_T(a_i | q_i, c_j) +
log P_T(q_i | c_j) = log P_T(q_i, a_i | c_j), so Q_G = softmax_j(F_ij) is the posterior of the
context given the question and its answer under a uniform prior. Not the paper's eq. 8 (the answer
alone): a context that holds the answer string but is not the one the question was written from
scores lower. The question's likelihood is a zero-shot reranker of its own (UPR, Sachan et al., 2022).
Its part is also kept alone (`question_lookup`): after a frozen-teacher stage a joint stage
adds it, as the generator scored it before training, to the live generator's log P_G(a_i | q_i, c_j).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from erag.lm import BASE_ADAPTER, encode_answers, encode_prompts, load_tokenizer
from erag.progress import progress
from rerag.inputs import fill
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model

#: Bumped when the file's layout or what an entry means changes.
CACHE_VERSION = 2  # 2: the question's part kept on its own (`TeacherScores.question_scores`)

#: Question tokens the teacher scores with a question template (EOS included; SQuAD's longest fit in ~60).
MAX_QUESTION_TOKENS = 64

#: Seconds between a scoring process's progress notes, which the processes waiting for its share read.
PROGRESS_SECONDS = 10.0

#: Seconds between a waiting process's looks at the cache folder.
POLL_SECONDS = 1.0

#: A scored row: its entry's key and (prompt, target, group: the prompt's text before the question).
Row = tuple[str, tuple[str, str, str]]


@dataclass(frozen=True)
class TeacherSpec:
    """The frozen teacher a stage with `re_learns_from: teacher` distils, read through its cache
    (`model.teacher`; null: no cache, and no such stage reads a cache).

    Args:
        cache_dir: the folder of the teacher's F_ij of every training pair the fit's epochs draw, computed
            once and kept, keyed by the teacher, the data file, the prompt, the contexts and the epochs.
        model: any Hugging Face LM as the teacher (None: the frozen generator).
        tokenizer: the teacher's tokenizer (None: the model's name_or_path).
        template: the teacher's input text (None: model.inputs.generator_template).
        question_template: a passage without the question, after which the teacher scores the question:
            F_ij = log P_T(a_i | q_i, c_j) + log P_T(q_i | c_j) (None: the answer alone, eq. 8); a later
            stage that learns from the live generator adds the cached log P_T(q_i | c_j) to its F.
        share_timeout: seconds a process waits for another process's share of the cache while that
            process shows no progress (under DDP each process scores a share): a process that scores
            slowly is waited for, one that died or writes to a folder this one does not see is named.
    """

    cache_dir: str
    model: ModelSpec | None = None
    tokenizer: str | None = None
    template: str | None = None
    question_template: str | None = None
    share_timeout: float = 1800.0

    def check(self) -> None:
        """A setting that cannot work, named (`model.teacher.<field>`)."""
        if self.model is not None:
            self.model.check("model.teacher.model")
        if not self.share_timeout > 0:
            raise ValueError(f"model.teacher.share_timeout: {self.share_timeout}: a number of seconds above 0")
        if self.question_template is not None and "{question}" in self.question_template:
            raise ValueError(
                f"model.teacher.question_template: {self.question_template!r} holds {{question}}: the teacher "
                "reads the passage alone and then scores the question"
            )


torch.serialization.add_safe_globals([TeacherSpec])  # checkpoints' hyperparameters hold it


def pair_key(question: str, answer: str, context: dict) -> str:
    """An entry's key: what the teacher read (the question, the context as training shows it to the
    generator) and the answer it scored."""
    fields = [question, answer, context.get("title", ""), context["text"]]
    return hashlib.sha1(json.dumps(fields).encode()).hexdigest()


def weights_fingerprint(model: torch.nn.Module) -> str:
    """A hash of a model's weights, LoRA adapters left out (with a shared base the teacher is the
    base, adapters off; the RE's adapter changes as it trains, the teacher does not)."""
    digest = hashlib.sha1()
    for name, tensor in sorted(model.state_dict().items()):
        if "lora_" not in name:
            digest.update(name.encode())
            digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def teacher_key(teacher: dict, data_file: str | Path, data_settings: dict) -> str:
    """The cache file's name: a hash of the teacher (its name, weights and prompt: `teacher`), the
    training file's bytes and the settings that pick the training contexts."""
    digest = hashlib.sha256()
    settings = {"version": CACHE_VERSION, "teacher": teacher, "data": data_settings}
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(Path(data_file).read_bytes())
    return digest.hexdigest()[:20]


class TeacherScores:
    """F for (question, answer, context) triples: `lookup` gives a training batch's [b, k] F_ij; with
    a question template, `question_lookup` gives its part log P_T(q_i | c_j) alone."""

    def __init__(self, scores: dict[str, float], key: str = "", question_scores: dict[str, float] | None = None):
        self.scores, self.key, self.question_scores = scores, key, question_scores or {}

    def __len__(self) -> int:
        return len(self.scores)

    def lookup(
        self, questions: Sequence[str], targets: Sequence[str], contexts: Sequence[Sequence[dict]]
    ) -> torch.Tensor:
        """F_ij [b, k] float32 for each question's sampled answer (`targets`) and its k contexts."""
        return self._rows(self.scores, questions, targets, contexts, "F")

    def question_lookup(self, questions: Sequence[str], contexts: Sequence[Sequence[dict]]) -> torch.Tensor:
        """log P_T(q_i | c_j) [b, k] float32: the question's part of F, the same for every answer."""
        return self._rows(self.question_scores, questions, [""] * len(questions), contexts, "log P(q | c)")

    def _rows(
        self,
        table: dict[str, float],
        questions: Sequence[str],
        targets: Sequence[str],
        contexts: Sequence[Sequence[dict]],
        what: str,
    ) -> torch.Tensor:
        rows = []
        for question, target, ctxs in zip(questions, targets, contexts):
            keys = [pair_key(question, target, c) for c in ctxs]
            missing = [c.get("id", "?") for c, k in zip(ctxs, keys) if k not in table]
            if missing:
                raise KeyError(
                    f"teacher cache {self.key}: no {what} for question {question!r}, answer {target!r}, "
                    f"contexts {missing}: the cache was built for other training pairs"
                )
            rows.append([table[k] for k in keys])
        return torch.tensor(rows, dtype=torch.float32)

    def save(self, path: Path) -> None:
        # The cache's version is part of its key (`teacher_key`), so the file holds no second copy.
        save_atomically({"key": self.key, "scores": self.scores, "question_scores": self.question_scores}, path)

    @classmethod
    def load(cls, path: Path) -> TeacherScores:
        saved = torch.load(path, weights_only=True)
        return cls(saved["scores"], saved["key"], saved["question_scores"])


def save_atomically(saved: dict, path: Path) -> None:
    """`torch.save` under a temporary name, then renamed: a run stopped mid-write leaves no half file
    under the real name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # runs building one key at once write apart
    torch.save(saved, tmp)
    tmp.replace(path)


@dataclass
class ScoringWork:
    """What the teacher scores for a set of triples, each row once: the answers' rows {entry: (prompt,
    answer, group)}; with a question template the questions' rows {(question, context)'s key: (prompt,
    question, group)} and each entry's question row (`of_question`). A group is the prompt's text
    before the question: what one context's rows share."""

    answers: dict[str, tuple[str, str, str]]
    questions: dict[str, tuple[str, str, str]]
    of_question: dict[str, str]


def scoring_work(
    teacher: Generator, triples: Iterable[tuple[str, str, dict]], question_template: str | None
) -> ScoringWork:
    """The rows of every distinct (question, answer, context) of `triples`, read through the teacher's
    template (and with `question_template`, a passage alone before the question)."""
    work = ScoringWork({}, {}, {})
    head = teacher.template.split("{question}")[0]  # what one context's rows share (the passage, if it comes first)
    for question, answer, context in triples:
        entry = pair_key(question, answer, context)
        work.answers.setdefault(entry, (fill(teacher.template, question, context), answer, fill(head, "", context)))
        if question_template is not None:
            work.of_question[entry] = pair_key(question, "", context)
            prompt = fill(question_template, "", context)
            work.questions.setdefault(work.of_question[entry], (prompt, question, prompt))
    return work


@torch.no_grad()
def build_teacher_scores(
    teacher: Generator,
    triples: Iterable[tuple[str, str, dict]],
    batch_size: int = 16,
    key: str = "",
    question_template: str | None = None,
) -> TeacherScores:
    """F for every distinct (question, answer, context) of `triples`, by `teacher` reading its own
    template (`teacher.template`, `teacher.max_length`); with `question_template` (a passage, no
    question) plus log P_T(q | c) of the question read after it (module docstring). A batch holds
    one context's rows, sorted by prompt length (`row_batches`). One process scores every row; under DDP
    `build_in_shares` splits the same batches among the processes."""
    work = scoring_work(teacher, triples, question_template)
    start = time.time()
    answers, questions = score_share(teacher, work, batch_size)
    print(f"teacher cache {key}: {len(answers)} F_ij in {time.time() - start:.0f} s", flush=True)
    return merged_scores(work, answers, questions, key)


@torch.no_grad()
def score_share(
    teacher: Generator,
    work: ScoringWork,
    batch_size: int,
    share: tuple[int, int] = (0, 1),
    on_batch: Callable[[], None] | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """log P_T(answer | prompt) of the answers' rows and log P_T(question | passage) of the questions'
    rows in `share` = (rank, processes) of each one's batches (`share_of`); the teacher in eval mode (no
    dropout) for the pass."""
    was_training = teacher.training
    teacher.eval()
    answers = target_logliks(
        teacher, work.answers, teacher.max_answer_length, batch_size, "teacher cache", share, on_batch
    )
    questions = {}
    if work.questions:
        what = "teacher cache: questions"
        questions = target_logliks(teacher, work.questions, MAX_QUESTION_TOKENS, batch_size, what, share, on_batch)
    teacher.train(was_training)
    return answers, questions


def merged_scores(work: ScoringWork, answers: dict[str, float], questions: dict[str, float], key: str) -> TeacherScores:
    """The cache from the scores of every row of `work`: F = the answer's log-likelihood, plus, with a
    question template, its question's."""
    if work.of_question:
        answers = {entry: f + questions[work.of_question[entry]] for entry, f in answers.items()}
    return TeacherScores(answers, key, questions)


def target_logliks(
    teacher: Generator,
    rows: dict[str, tuple[str, str, str]],
    max_target_tokens: int,
    batch_size: int,
    what: str,
    share: tuple[int, int] = (0, 1),
    on_batch: Callable[[], None] | None = None,
) -> dict[str, float]:
    """log P_T(target | prompt) of each {key: (prompt, target, group)} in the batches of `share` =
    (rank, processes) (`row_batches`, `share_of`); `on_batch` is called after each batch."""
    batches = share_of(row_batches(rows, batch_size), *share)
    device = next(teacher.parameters()).device
    out: dict[str, float] = {}
    for chunk in progress(batches, what, unit="batches"):
        prompts = encode_prompts(teacher.tokenizer, [p for _, (p, _, _) in chunk], teacher.max_length)
        labels = encode_answers(teacher.tokenizer, [t for _, (_, t, _) in chunk], max_target_tokens)
        f = teacher.answer_loglik(
            prompts["input_ids"].to(device), prompts["attention_mask"].to(device), labels.to(device)
        )
        out.update(zip((k for k, _ in chunk), f.float().tolist()))
        if on_batch is not None:
            on_batch()
    return out


def row_batches(rows: dict[str, tuple[str, str, str]], batch_size: int) -> list[list[Row]]:
    """`rows` {key: (prompt, target, group)} in batches of at most `batch_size` rows of one group (the
    prompt's text before the question), sorted by prompt length. Each context's rows, one per question
    that retrieved it, then share their prompt up to the question, which the teacher runs once per
    batch on a CPU (`erag.lm.decoder_states`); BM25's top 20 of many questions hold each passage many
    times."""
    items = sorted(rows.items(), key=lambda item: (item[1][2], len(item[1][0])))
    batches = []
    for _, group in itertools.groupby(items, key=lambda item: item[1][2]):
        group = list(group)
        batches += [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
    return batches


def share_of(batches: list[list[Row]], rank: int, processes: int) -> list[list[Row]]:
    """Process `rank`'s share of `batches` among `processes`: the batches whose middle character (of
    the prompts and targets read up to there) falls in the rank's 1/`processes` of all of them. The
    shares cover every batch once, in order, balanced by length to within a batch; a batch is never
    cut, so it keeps its one context's prompt prefix, and its rows' F are those one process scores."""
    if processes == 1:
        return batches
    costs = [sum(len(prompt) + len(target) for _, (prompt, target, _) in batch) for batch in batches]
    total, before, share = sum(costs), 0, []
    for batch, cost in zip(batches, costs):
        if min(int(processes * (before + cost / 2) // total), processes - 1) == rank:
            share.append(batch)
        before += cost
    return share


class CacheShares:
    """The files of one cache built in shares by `processes` processes in `folder`: process r's share
    `<key>.share-<r>-of-<n>-batch-<b>.pt` (its rows' scores, written atomically as the cache is) and
    its progress note, the same name ending `.progress` (rewritten while it scores; the processes
    waiting for its share read it). The name holds the number of processes and the batch size, which
    decide the shares' rows, so a build resumed with others scores afresh."""

    def __init__(self, folder: str | Path, key: str, rank: int, processes: int, batch_size: int):
        self.folder, self.key, self.rank, self.processes = Path(folder), key, rank, processes
        self.batch_size = batch_size
        self.batches_scored, self.noted_at = 0, -float("inf")

    def path(self, rank: int) -> Path:
        return self.folder / f"{self.key}.share-{rank}-of-{self.processes}-batch-{self.batch_size}.pt"

    def note_path(self, rank: int) -> Path:
        return self.path(rank).with_suffix(".progress")

    def note(self) -> None:
        """This process's progress note, rewritten (its content changes every time)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.note_path(self.rank).write_text(f"{self.batches_scored} batches scored at {time.time():.3f}\n")
        self.noted_at = time.monotonic()

    def batch_scored(self) -> None:
        """After each batch this process scores: its note rewritten, at most every `PROGRESS_SECONDS`."""
        self.batches_scored += 1
        if time.monotonic() - self.noted_at >= PROGRESS_SECONDS:
            self.note()

    def save(self, answers: dict[str, float], questions: dict[str, float]) -> None:
        save_atomically({"key": self.key, "answers": answers, "questions": questions}, self.path(self.rank))

    def load(self, rank: int) -> tuple[dict[str, float], dict[str, float]]:
        saved = torch.load(self.path(rank), weights_only=True)
        return saved["answers"], saved["questions"]

    def wait_for_all(self, final: Path, timeout: float) -> bool:
        """Wait until every share is on disk (True), or the cache `final` is (False: another run wrote
        it meanwhile). A missing share's process is waited for as long as its progress note changes;
        TimeoutError once one has not for `timeout` seconds (this process's clock: nodes' clocks may
        differ)."""
        seen: dict[int, tuple[str | None, float]] = {}  # rank -> (its note, when this process saw it change)
        while not final.exists():
            missing = [r for r in range(self.processes) if not self.path(r).exists()]
            if not missing:
                return True
            now = time.monotonic()
            for r in missing:
                note = self.note_path(r).read_text() if self.note_path(r).exists() else None
                if r not in seen or seen[r][0] != note:
                    seen[r] = (note, now)
            if stalled := [r for r in missing if now - seen[r][1] > timeout]:
                raise TimeoutError(
                    f"teacher cache {self.key}: no share of process(es) {stalled} of {self.processes} in {self.folder}, "
                    f"and no progress noted for {timeout:g} s (model.teacher.share_timeout): a process stopped, or "
                    "writes to a cache_dir this one does not see (nodes without a shared filesystem: docs/clusters.md). "
                    "The shares written are kept; a run started again with as many processes scores only the others"
                )
            time.sleep(POLL_SECONDS)
        return False

    def remove(self) -> None:
        """Every share file and note of this key (of any number of processes), once the cache is written."""
        for path in self.folder.glob(f"{self.key}.share-*"):
            path.unlink(missing_ok=True)


def build_in_shares(
    teacher: Generator,
    triples: Iterable[tuple[str, str, dict]],
    shares: CacheShares,
    final: Path,
    *,
    question_template: str | None,
    timeout: float,
) -> TeacherScores:
    """The cache of `triples` (as `build_teacher_scores` builds it) from `shares.processes` processes, this
    one scoring its share (`share_of`, in batches of `shares.batch_size`) unless a stopped build wrote it,
    then reading every share once all are on disk; or the cache `final`, where another run wrote it
    meanwhile. Every process's rows are the same (the same triples), so the shares fit together."""
    work = scoring_work(teacher, triples, question_template)
    own = shares.path(shares.rank)
    if not own.exists():
        shares.note()
        start = time.time()
        share = (shares.rank, shares.processes)
        answers, questions = score_share(teacher, work, shares.batch_size, share, shares.batch_scored)
        shares.save(answers, questions)
        print(
            f"teacher cache {shares.key}: share {shares.rank} of {shares.processes}: {len(answers)} of "
            f"{len(work.answers)} F_ij in {time.time() - start:.0f} s",
            flush=True,
        )
    if not shares.wait_for_all(final, timeout):
        return TeacherScores.load(final)
    answers, questions = {}, {}
    for rank in range(shares.processes):
        share_answers, share_questions = shares.load(rank)
        answers |= share_answers
        questions |= share_questions
    if answers.keys() != work.answers.keys() or questions.keys() != work.questions.keys():
        raise RuntimeError(
            f"teacher cache {shares.key}: the {shares.processes} shares in {shares.folder} "
            f"({shares.path(0).name} and the rest) do not hold this run's rows: remove {shares.key}.share-* there "
            "and start again"
        )
    return merged_scores(work, answers, questions, shares.key)


def teacher_for_cache(
    generator: Generator,
    *,
    template: str,
    tokenizer_name: str,
    adapters_off: bool,
    other: ModelSpec | None,
    other_tokenizer: str | None,
    spec: ModelSpec,
) -> tuple[Generator, dict]:
    """The teacher that scores F_ij for the cache, reading `template`, and what identifies it: the frozen
    generator (the shared base with adapters off, or the generator model; with `adapters_off`, where a
    stage trains the generator before the RE learns from the teacher, its adapters off, so the teacher
    is the generator the fit began with), or `other`, any Hugging Face LM loaded here (`spec` is the
    teacher's spec, its name part of the identity)."""
    g = generator
    if other is None:
        adapter = BASE_ADAPTER if adapters_off else g.adapter
        teacher = Generator(g.model, g.tokenizer, g.max_answer_length, template, g.max_length, adapter)
    else:
        tokenizer_name = other_tokenizer or other.name_or_path
        tok = load_tokenizer(tokenizer_name, other.trust_remote_code)
        device = next(g.model.parameters()).device
        model = build_model(other, tok).requires_grad_(False).to(device)
        teacher = Generator(model, tok, g.max_answer_length, template, g.max_length)
    name = {"model": spec.name_or_path, "tokenizer": tokenizer_name}
    return teacher, name | {"weights": weights_fingerprint(teacher)}


def read_or_build(
    teacher: Generator,
    identity: dict,
    trainer,
    epochs: int | None,
    *,
    cache_dir: str,
    began_with: str | None,
    batch_size: int,
    question_template: str | None,
    share_timeout: float,
) -> tuple[TeacherScores, str]:
    """The teacher's F_ij for every training pair the fit's `epochs` draw (the trainer's datamodule's
    `teacher_triples`), and the cache file's key: read from `cache_dir`, or computed and written first,
    each process scoring its share (`build_in_shares`; rank zero writes the merged file and, once every
    process holds it, removes the shares). `began_with`: a resumed run's key, which holds over today's
    (a generator that trains every weight, not a LoRA adapter, which the key leaves out, has moved
    since, and its key would rebuild the cache from the trained one)."""
    data = trainer.datamodule
    prompt = {
        "template": teacher.template,
        "max_length": teacher.max_length,
        "max_answer_length": teacher.max_answer_length,
    }
    if question_template is not None:  # absent when off, so earlier caches keep their key
        prompt |= {"question_template": question_template, "max_question_tokens": MAX_QUESTION_TOKENS}
    settings = data.teacher_triple_settings() | ({} if epochs is None else {"epochs": epochs})
    key = teacher_key(identity | prompt, data.train_file, settings)
    began_with = began_with or key
    path = Path(cache_dir) / f"{began_with}.pt"
    shares = None
    if path.exists():
        scores = TeacherScores.load(path)
    elif began_with != key:
        raise FileNotFoundError(
            f"teacher cache {path}: the run being resumed began with it, and its generator has trained "
            "since, so it cannot be rebuilt; restore the file or start the run again"
        )
    else:
        shares = CacheShares(path.parent, key, trainer.global_rank, trainer.world_size, batch_size)
        triples = data.teacher_triples(epochs)
        scores = build_in_shares(
            teacher, triples, shares, path, question_template=question_template, timeout=share_timeout
        )
        if trainer.is_global_zero and not path.exists():
            scores.save(path)
    trainer.strategy.barrier("teacher cache")  # a short wait: every process has read the shares by now
    if shares is not None and trainer.is_global_zero:
        shares.remove()
    return scores, began_with
