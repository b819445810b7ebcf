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
from collections.abc import Iterable, Sequence
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
    """

    cache_dir: str
    model: ModelSpec | None = None
    tokenizer: str | None = None
    template: str | None = None
    question_template: str | None = None

    def check(self) -> None:
        """A setting that cannot work, named (`model.teacher.<field>`)."""
        if self.model is not None:
            self.model.check("model.teacher.model")
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
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # runs building one key at once write apart
        # The cache's version is part of its key (`teacher_key`), so the file holds no second copy.
        torch.save({"key": self.key, "scores": self.scores, "question_scores": self.question_scores}, tmp)
        tmp.replace(path)  # a run stopped mid-write leaves no half file under the real name

    @classmethod
    def load(cls, path: Path) -> TeacherScores:
        saved = torch.load(path, weights_only=True)
        return cls(saved["scores"], saved["key"], saved["question_scores"])


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
    one context's rows, sorted by prompt length (`target_logliks`); the teacher is put in eval mode (no
    dropout) for the pass."""
    answers: dict[str, tuple[str, str, str]] = {}
    questions: dict[str, tuple[str, str, str]] = {}
    of_question: dict[str, str] = {}  # an entry's key -> its (question, context)'s key
    head = teacher.template.split("{question}")[0]  # what one context's rows share (the passage, if it comes first)
    for question, answer, context in triples:
        entry = pair_key(question, answer, context)
        answers.setdefault(entry, (fill(teacher.template, question, context), answer, fill(head, "", context)))
        if question_template is not None:
            of_question[entry] = pair_key(question, "", context)
            prompt = fill(question_template, "", context)
            questions.setdefault(of_question[entry], (prompt, question, prompt))
    was_training = teacher.training
    teacher.eval()
    start = time.time()
    scores = target_logliks(teacher, answers, teacher.max_answer_length, batch_size, "teacher cache")
    question_ll = {}
    if question_template is not None:
        question_ll = target_logliks(teacher, questions, MAX_QUESTION_TOKENS, batch_size, "teacher cache: questions")
        scores = {entry: f + question_ll[of_question[entry]] for entry, f in scores.items()}
    teacher.train(was_training)
    print(f"teacher cache {key}: {len(scores)} F_ij in {time.time() - start:.0f} s", flush=True)
    return TeacherScores(scores, key, question_ll)


def target_logliks(
    teacher: Generator, rows: dict[str, tuple[str, str, str]], max_target_tokens: int, batch_size: int, what: str
) -> dict[str, float]:
    """log P_T(target | prompt) of each {key: (prompt, target, group)}: a batch holds rows of one
    group (the prompt's text before the question), sorted by prompt length. Each context's rows,
    one per question that retrieved it, then share their prompt up to the question, which the
    teacher runs once per batch on a CPU (`erag.lm.decoder_states`); BM25's top 20 of many questions
    hold each passage many times."""
    items = sorted(rows.items(), key=lambda item: (item[1][2], len(item[1][0])))
    device = next(teacher.parameters()).device
    out: dict[str, float] = {}
    batches = []
    for _, group in itertools.groupby(items, key=lambda item: item[1][2]):
        group = list(group)
        batches += [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
    for chunk in progress(batches, what, unit="batches"):
        prompts = encode_prompts(teacher.tokenizer, [p for _, (p, _, _) in chunk], teacher.max_length)
        labels = encode_answers(teacher.tokenizer, [t for _, (_, t, _) in chunk], max_target_tokens)
        f = teacher.answer_loglik(
            prompts["input_ids"].to(device), prompts["attention_mask"].to(device), labels.to(device)
        )
        out.update(zip((k for k, _ in chunk), f.float().tolist()))
    return out


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
) -> tuple[TeacherScores, str]:
    """The teacher's F_ij for every training pair the fit's `epochs` draw (the trainer's datamodule's
    `teacher_triples`), and the cache file's key: read from `cache_dir`, or computed and written first
    (by rank zero; the other processes wait at a barrier, then read). `began_with`: a resumed run's
    key, which holds over today's (a generator that trains every weight, not a LoRA adapter, which
    the key leaves out, has moved since, and its key would rebuild the cache from the trained one)."""
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
    if trainer.is_global_zero and not path.exists():
        if began_with != key:
            raise FileNotFoundError(
                f"teacher cache {path}: the run being resumed began with it, and its generator has trained "
                "since, so it cannot be rebuilt; restore the file or start the run again"
            )
        scores = build_teacher_scores(
            teacher, data.teacher_triples(epochs), batch_size=batch_size, key=key, question_template=question_template
        )
        scores.save(path)
    trainer.strategy.barrier("teacher cache")
    return TeacherScores.load(path), began_with
