"""The synthetic world: the embedded default data set, deterministic by seed.

Fictional people, cities and guilds (names built from syllables, so no pretrained knowledge
helps) have facts; each fact is written into a passage among filler sentences. Questions come
from several templates per relation, with answer aliases. The corpus also holds hard
distractors, passages that share the question's words (the person, the relation's verb) but
state no answer or a wrong one, and some facts are never written down, so those questions
retrieve no answer at all. BM25 (bm25s) retrieves top-20 contexts for train and top-100 for
dev/test, written as FiD-format JSONL.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from erag.answers import has_answer
from rerag.defaults import EVAL_CONTEXTS, TRAIN_CONTEXTS

_SYLLABLES = (
    "ka ri mo ve lan tor esh ul bri da nox fel quin yor sa pel ith gar ro mi zen tha cor ly vash dro emb ik sol tuv"
).split()
_PROFESSIONS = (
    "clockmaker weaver cartographer glassblower beekeeper astronomer potter "
    "shipwright herbalist bookbinder stonemason violinist"
).split()
_FILLER = [
    "The valley around {place} is known for its long winters.",
    "Travellers often remark on the bridges of {place}.",
    "Old songs about {place} are still sung at harvest time.",
    "A small market opens every morning near the river.",
    "Records from that period are scattered across several archives.",
    "The guild halls of {place} were rebuilt after the great flood.",
    "Many families kept bees and grew barley on the hills.",
    "Scholars disagree about the age of the northern road.",
]
# relation -> (question templates, fact templates, distractor templates)
_RELATIONS = {
    "birthplace": (
        ["where was {p} born?", "in which city was {p} born?", "what is the birthplace of {p}?"],
        [
            "{p} was born in {a}.",
            "Born in {a}, {p} spent a quiet childhood there.",
            "The city of {a} is where {p} was born.",
        ],
        [
            "{p} visited {x} often, a city where many famous people were born.",
            "Where {p} was born is a question the surviving records do not answer.",
        ],
    ),
    "profession": (
        ["what did {p} work as?", "what was the occupation of {p}?", "what job did {p} have?"],
        ["{p} worked as a {a} for most of a long life.", "By trade, {p} was a {a}.", "{p} earned a living as a {a}."],
        [
            "{p} admired the work of a {x} but never took up that occupation.",
            "Nobody wrote down what job {p} had in the later years.",
        ],
    ),
    "guild": (
        ["which guild did {p} found?", "what guild was founded by {p}?", "{p} founded which guild?"],
        ["{p} founded the {a}.", "The {a} was founded by {p}.", "Among the guilds, the {a} owes its founding to {p}."],
        [
            "{p} once joined the {x}, which another member founded.",
            "Which guild {p} founded is still argued over by historians.",
        ],
    ),
    "year": (
        ["when was {p} born?", "in what year was {p} born?", "what year was {p} born in?"],
        [
            "{p} was born in the year {a}.",
            "In {a}, {p} was born to a family of farmers.",
            "The birth of {p} in {a} was noted in the town ledger.",
        ],
        ["{p} was born in a year of floods, long before {x}.", "In what year {p} was born nobody can say for sure."],
    ),
}


@dataclass
class WorldConfig:
    """Sizes of the synthetic world. Entities are split between train, dev and test."""

    seed: int = 0
    n_train_people: int = 600
    n_dev_people: int = 60
    n_test_people: int = 60
    n_cities: int = 80
    n_guilds: int = 40
    unanswerable_rate: float = 0.15
    n_train_contexts: int = TRAIN_CONTEXTS
    n_eval_contexts: int = EVAL_CONTEXTS


# Lightning checkpoints keep the datamodule's hyperparameters; allow weights_only loading.
torch.serialization.add_safe_globals([WorldConfig])


class UniqueNames:
    """Capitalized names of `parts` random syllables, each name given out once."""

    def __init__(self, rng: random.Random, syllables: tuple[str, ...] = _SYLLABLES):
        self.rng, self.syllables, self.used = rng, syllables, set()

    def make(self, parts: int) -> str:
        for _ in range(10_000):
            word = "".join(self.rng.choice(self.syllables) for _ in range(parts)).capitalize()
            if word not in self.used:
                self.used.add(word)
                return word
        raise ValueError(f"ran out of distinct {parts}-syllable names: ask for fewer entities")


def _passage(rng: random.Random, sentence: str, place: str) -> str:
    filler = rng.sample(_FILLER, 2)
    sentences = [f.format(place=place) for f in filler]
    sentences.insert(rng.randrange(3), sentence)
    return " ".join(sentences)


def build_world(cfg: WorldConfig) -> tuple[list[dict], dict[str, list[dict]]]:
    """Return the passage corpus and, per split, the questions with their gold answers."""
    rng = random.Random(cfg.seed)
    names = UniqueNames(rng)
    cities = [names.make(2) for _ in range(cfg.n_cities)]
    guilds = [f"{names.make(2)} Guild" for _ in range(cfg.n_guilds)]
    first_names = [names.make(2) for _ in range(100)]
    corpus: list[dict] = []
    questions: dict[str, list[dict]] = {"train": [], "dev": [], "test": []}
    sizes = {"train": cfg.n_train_people, "dev": cfg.n_dev_people, "test": cfg.n_test_people}
    for split, n in sizes.items():
        for _ in range(n):
            person = f"{rng.choice(first_names)} {names.make(3)}"
            facts = {
                "birthplace": (rng.choice(cities), rng.choice(cities)),
                "profession": (rng.choice(_PROFESSIONS), rng.choice(_PROFESSIONS)),
                "guild": (rng.choice(guilds), rng.choice(guilds)),
                "year": (str(rng.randrange(1400, 1900)), str(rng.randrange(1400, 1900))),
            }
            # Filler never names the person's birthplace: only the fact passage may hold it.
            places = [c for c in cities if c != facts["birthplace"][0]]
            for rel, (answer, other) in facts.items():
                q_tmpls, f_tmpls, d_tmpls = _RELATIONS[rel]
                written = rng.random() >= cfg.unanswerable_rate
                if written:
                    fact = rng.choice(f_tmpls).format(p=person, a=answer)
                    corpus.append({"title": person, "text": _passage(rng, fact, rng.choice(places))})
                if other != answer:  # a wrong-answer distractor must not contain the answer
                    wrong = d_tmpls[0].format(p=person, x=other)
                    corpus.append({"title": person, "text": _passage(rng, wrong, rng.choice(places))})
                empty = d_tmpls[1].format(p=person)
                corpus.append({"title": person, "text": _passage(rng, empty, rng.choice(places))})
                answers = [answer]
                if rel == "birthplace":
                    answers.append(f"the city of {answer}")
                elif rel == "guild":
                    answers.append(answer.removesuffix(" Guild"))
                elif rel == "profession":
                    answers.append(f"a {answer}")
                questions[split].append(
                    {
                        "question": rng.choice(q_tmpls).format(p=person),
                        "answers": answers,
                        "relation": rel,
                        "answerable_in_corpus": written,
                    }
                )
    for i, doc in enumerate(corpus):
        doc["id"] = f"p{i}"
    return corpus, questions


def retrieve_bm25(corpus: list[dict], questions: list[dict], k: int) -> list[list[tuple[int, float]]]:
    """Top-k (passage index, BM25 score) per question with bm25s over title + text."""
    from eor.retrievers.bm25 import import_bm25s  # here, not at the top: bm25s may import JAX (see there)

    bm25s = import_bm25s()
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([f"{d['title']} {d['text']}" for d in corpus], show_progress=False), show_progress=False
    )
    docs, scores = retriever.retrieve(
        bm25s.tokenize([q["question"] for q in questions], show_progress=False),
        k=min(k, len(corpus)),
        show_progress=False,
        n_threads=1,
    )
    return [list(zip(map(int, d), map(float, s))) for d, s in zip(np.asarray(docs), np.asarray(scores))]


def write_world(out_dir: str | Path, cfg: WorldConfig | None = None) -> dict[str, Path]:
    """Build the world and write `corpus.jsonl` and FiD-format `{train,dev,test}.jsonl`."""
    cfg = cfg or WorldConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus, questions = build_world(cfg)
    with open(out / "corpus.jsonl", "w") as f:
        for doc in corpus:
            f.write(json.dumps(doc) + "\n")
    paths = {"corpus": out / "corpus.jsonl"}
    for split, qs in questions.items():
        k = cfg.n_train_contexts if split == "train" else cfg.n_eval_contexts
        hits = retrieve_bm25(corpus, qs, k)
        paths[split] = out / f"{split}.jsonl"
        with open(paths[split], "w") as f:
            for i, (q, ranked) in enumerate(zip(qs, hits)):
                ctxs = [
                    {**corpus[j], "score": s, "has_answer": has_answer(corpus[j]["text"], q["answers"])}
                    for j, s in ranked
                ]
                record = {
                    "id": f"{split}-{i}",
                    "question": q["question"],
                    "answers": q["answers"],
                    "relation": q["relation"],
                    "ctxs": ctxs,
                }
                f.write(json.dumps(record) + "\n")
    return paths
