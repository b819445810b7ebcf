"""Reader pretraining: teach a small seq2seq model with a copy head to copy an answer span from
a passage, so that the embedded default's generator starts out reading.

A tiny T5 trained from random init inside RE-RAG does not learn to copy within a CPU budget, and
without a copying generator the F_ij are flat and the RE gets no signal. This module writes a
synthetic reading-comprehension corpus that shares NO templates, relations or names with the
demo world (`rerag.demo.world`): its own name syllables, entity kinds, relations, question
and fact templates and filler, and trains a `pointer_t5` reader (`rerag.models.pointer_t5`)
on (question, title, passage) -> answer. `rerag pretrain` runs it and writes a generator folder
(safetensors); the one shipped as `rerag/assets/reader` is what configs/demo.yaml starts from.
Deterministic by seed and thread count.

Each passage holds the answer sentence among distractor sentences: other facts about the same
entity (other relations) and the same relation about other entities, so the reader must match
both the entity and the relation of the question before it copies.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from erag.answers import exact_match
from rerag.demo.world import UniqueNames
from rerag.inputs import format_pairs
from rerag.prompts import DEFAULT_TEMPLATE

# Name syllables: disjoint from the demo world's.
SYLLABLES = (
    "bek dun hap ock wim zor tel pua nib gru fam lo sib quo rak jen vu tam hed ob "
    "ax pim kes wex uno gli trem bo fis nau"
).split()

# Answer vocabularies (common nouns the demo world never uses as answers).
_NOUNS = {
    "animal": "otter falcon badger heron lynx walrus beaver gecko ferret magpie bison stork".split(),
    "colour": "crimson amber teal violet ochre silver indigo scarlet ivory olive".split(),
    "instrument": "cello flute harp oboe lute drum trumpet banjo zither organ".split(),
    "food": "porridge dumplings lentils pancakes cheese apricots chestnuts herring plums".split(),
    "tool": "hammer chisel lantern compass spade anvil telescope sickle ladder".split(),
    "material": "copper marble cedar granite linen bronze oak slate wool".split(),
}

# Generic "attribute" relations: the question and the fact share the attribute noun.
_ATTRIBUTES = {
    # attribute noun -> answer kind
    "mentor": "person",
    "rival": "person",
    "neighbour": "person",
    "sister": "person",
    "brother": "person",
    "teacher": "person",
    "partner": "person",
    "cousin": "person",
    "horse": "short",
    "dog": "short",
    "boat": "short",
    "lucky number": "number",
    "favourite colour": "colour",
    "favourite animal": "animal",
    "favourite food": "food",
    "favourite instrument": "instrument",
    "oldest tool": "tool",
    "house number": "number",
    "village": "place",
    "island": "place",
    "harbour": "place",
    "home street": "street",
}
_ATTR_FACTS = [
    "The {r} of {e} is {a}.",
    "{e}'s {r} was {a}.",
    "{a} was the {r} of {e}.",
    "Everyone knew that the {r} of {e} was {a}.",
    "As for {e}, the {r} was {a}.",
]
_ATTR_QUESTIONS = [
    "what is the {r} of {e}?",
    "who or what was the {r} of {e}?",
    "tell me the {r} of {e}.",
    "name the {r} of {e}.",
    "{e} had which {r}?",
]

# Verb relations: (answer kind, question templates, fact templates).
_VERBS = {
    "plays": (
        "instrument",
        ["which instrument does {e} play?", "what does {e} play in the band?"],
        ["{e} plays the {a} in the evenings.", "On stage, {e} played the {a}.", "The {a} is what {e} plays best."],
    ),
    "eats": (
        "food",
        ["what does {e} eat for breakfast?", "which dish does {e} cook most?"],
        [
            "{e} eats {a} every morning.",
            "For breakfast {e} always cooks {a}.",
            "Nothing pleases {e} like a plate of {a}.",
        ],
    ),
    "married": (
        "person",
        ["whom did {e} marry?", "who is the spouse of {e}?"],
        ["{e} married {a} in the spring.", "{a} and {e} were married by the lake.", "The spouse of {e} is {a}."],
    ),
    "sailed": (
        "place",
        ["to which island did {e} sail?", "where did {e} sail to?"],
        ["{e} sailed to {a} on a grey morning.", "The voyage took {e} to {a}.", "It was to {a} that {e} sailed."],
    ),
    "owns": (
        "count",
        ["how many goats does {e} own?", "what number of goats does {e} keep?"],
        ["{e} owns {a} goats.", "A herd of {a} goats belongs to {e}.", "{e} keeps exactly {a} goats behind the barn."],
    ),
    "built": (
        "material",
        ["what did {e} build the bridge from?", "which material did {e} use for the bridge?"],
        [
            "{e} built the bridge from {a}.",
            "The bridge that {e} built is made of {a}.",
            "Using {a}, {e} built a narrow bridge.",
        ],
    ),
    "painted": (
        "colour",
        ["which colour did {e} paint the door?", "what colour is the door of {e}?"],
        ["{e} painted the door {a}.", "The door of {e} is painted {a}.", "A {a} door marks the house of {e}."],
    ),
    "wrote": (
        "title",
        ["which book did {e} write?", "what is the title of the book by {e}?"],
        ["{e} wrote the book {a}.", "The book {a} was written by {e}.", "Readers remember {e} for the book {a}."],
    ),
    "moved": (
        "date",
        ["in which year did {e} move away?", "when did {e} move to the coast?"],
        [
            "{e} moved to the coast in {a}.",
            "In {a}, {e} moved away for good.",
            "The move of {e} to the coast happened in {a}.",
        ],
    ),
    "company": (
        "company",
        ["which company does {e} run?", "what firm is led by {e}?"],
        ["{e} runs {a}.", "{a} is led by {e}.", "Since its early days, {a} has been run by {e}."],
    ),
}

_FILLER = [
    "The road to {q} is lined with tall poplars.",
    "Fishermen from {q} sell their catch at dawn.",
    "A lighthouse stands on the cliffs above {q}.",
    "Rain falls often in the hills, and the rivers run fast.",
    "The library keeps letters from that time in wooden boxes.",
    "Children in {q} learn to swim before they can read.",
    "Winds from the sea shape the trees along the shore.",
    "The old mill near {q} still turns on windy days.",
    "Few maps of the region agree on where the marshes end.",
    "Merchants crossed the pass twice a year with their carts.",
]


@dataclass
class CorpusConfig:
    """Sizes of the pretraining corpus; its examples are drawn on the fly from `seed`."""

    seed: int = 1234
    n_entities: int = 3000
    n_places: int = 150
    n_first_names: int = 100
    min_sentences: int = 2  # sentences per passage, the answer sentence included
    max_sentences: int = 3
    p_vocab_names: float = 0.5  # share of names spelled from the tokenizer's own word pieces
    p_span_task: float = 0.0  # share of "what follows <words>?" copy questions (an induction warm-up)
    p_same_relation_distractor: float = 0.7  # share of passages with the relation about another entity


class ReadingCorpus:
    """Entities with facts, and a sampler of (question, title, passage, answers) examples."""

    def __init__(self, cfg: CorpusConfig, vocab_pieces: list[str] | None = None):
        """`vocab_pieces`: alphabetic tokenizer pieces that names may be spelled from, so that the
        reader learns to copy every token of the vocabulary, not only the corpus's syllables."""
        self.cfg = cfg
        pieces = sorted(set(vocab_pieces or []))
        self.tails = [p for p in pieces if p.islower()]  # word continuations
        rng = random.Random(cfg.seed)
        names = UniqueNames(rng, SYLLABLES)
        self.places = [names.make(2) for _ in range(cfg.n_places)]
        first = [names.make(2) for _ in range(cfg.n_first_names)]
        entities: set[str] = set()
        while len(entities) < cfg.n_entities:
            kind, name = rng.random(), self._fresh(rng, 2, vocab=False)
            if kind < 0.7:
                entities.add(f"{rng.choice(first)} {name}")
            elif kind < 0.85:
                entities.add(f"the ship {name}")
            else:
                entities.add(f"Captain {name}")
        self.entities = sorted(entities)
        self.relations = [("attr", r) for r in _ATTRIBUTES] + [("verb", v) for v in _VERBS]

    def _answer(self, rng: random.Random, kind: str) -> tuple[str, list[str]]:
        """An answer of `kind` and its accepted aliases."""
        if kind == "person":
            return f"{self._fresh(rng, 2)} {self._fresh(rng, 2)}", []
        if kind == "short":
            a = self._fresh(rng, rng.choice((1, 2)))
            return a, []
        if kind == "place":
            return rng.choice(self.places), []
        if kind == "street":
            a = f"{self._fresh(rng, 2)} Lane"
            return a, [a.removesuffix(" Lane")]
        if kind == "number":
            return str(rng.randrange(1, 1000)), []
        if kind == "count":
            return str(rng.randrange(2, 90)), []
        if kind == "date":
            return str(rng.randrange(1000, 2100)), []
        if kind == "title":
            return f"{self._fresh(rng, 2)} and the {rng.choice(_NOUNS['animal'])}", []
        if kind == "company":
            a = f"{self._fresh(rng, 2)} Trading Company"
            return a, [a.removesuffix(" Trading Company")]
        return rng.choice(_NOUNS[kind]), []

    def _fresh(self, rng: random.Random, parts: int, vocab: bool = True) -> str:
        """A name (need not be unique): corpus syllables or a syllable and a tokenizer piece."""
        if vocab and self.tails and rng.random() < self.cfg.p_vocab_names:
            return (rng.choice(SYLLABLES) + rng.choice(self.tails)).capitalize()
        return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()

    def _sentence(self, rng: random.Random, rel: tuple[str, str], entity: str, answer: str) -> str:
        kind, name = rel
        tmpl = rng.choice(_ATTR_FACTS) if kind == "attr" else rng.choice(_VERBS[name][2])
        s = tmpl.format(e=entity, a=answer, r=name)
        return s[0].upper() + s[1:]

    def _question(self, rng: random.Random, rel: tuple[str, str], entity: str) -> str:
        kind, name = rel
        tmpl = rng.choice(_ATTR_QUESTIONS) if kind == "attr" else rng.choice(_VERBS[name][1])
        return tmpl.format(e=entity, r=name)

    def _kind(self, rel: tuple[str, str]) -> str:
        return _ATTRIBUTES[rel[1]] if rel[0] == "attr" else _VERBS[rel[1]][0]

    def sample(self, rng: random.Random, entity: str | None = None, rel: tuple[str, str] | None = None) -> dict:
        """One example: the answer sentence among distractors and filler; about `entity` and
        `rel` when given (else drawn)."""
        cfg = self.cfg
        entity = entity if entity is not None else rng.choice(self.entities)
        rel = rel if rel is not None else rng.choice(self.relations)
        answer, aliases = self._answer(rng, self._kind(rel))
        n = rng.randint(cfg.min_sentences, cfg.max_sentences)
        sentences = [self._sentence(rng, rel, entity, answer)]
        if rng.random() < cfg.p_same_relation_distractor:  # same relation, another entity
            other = rng.choice(self.entities)
            if other != entity:
                wrong, _ = self._answer(rng, self._kind(rel))
                if wrong != answer:
                    sentences.append(self._sentence(rng, rel, other, wrong))
        while len(sentences) < n:
            if rng.random() < 0.5:  # another relation of the same entity
                other_rel = rng.choice(self.relations)
                wrong, _ = self._answer(rng, self._kind(other_rel))
                if other_rel != rel and wrong != answer:
                    sentences.append(self._sentence(rng, other_rel, entity, wrong))
            else:
                sentences.append(rng.choice(_FILLER).format(q=rng.choice(self.places)))
        rng.shuffle(sentences)
        title, text = entity[0].upper() + entity[1:], " ".join(sentences)
        if rng.random() < cfg.p_span_task:  # copy the 1-3 words that follow a 2-3 word cue
            words = text.split(" ")
            n_cue, n_ans = rng.randint(2, 3), rng.randint(1, 3)
            start = rng.randrange(0, max(len(words) - n_cue - n_ans, 0) + 1)
            cue = " ".join(words[start : start + n_cue])
            span = " ".join(words[start + n_cue : start + n_cue + n_ans]).strip(".,")
            if span and text.count(cue) == 1:
                return {"question": f'which words follow "{cue}"?', "title": title, "text": text, "answers": [span]}
        return {
            "question": self._question(rng, rel, entity),
            "title": title,
            "text": text,
            "answers": [answer, *aliases],
        }

    def examples(self, n: int, seed: int) -> list[dict]:
        rng = random.Random(seed)
        return [self.sample(rng) for _ in range(n)]


@dataclass
class PretrainConfig:
    """The reader's size and its training run."""

    out_dir: str = "outputs/reader"
    tokenizer: str = "rerag:assets/demo_tokenizer"
    model_type: str = "pointer_t5"  # pointer_t5 (T5 with a copy head) | t5
    d_model: int = 128
    d_ff: int = 256
    d_kv: int = 32
    num_heads: int = 4
    num_layers: int = 2
    num_decoder_layers: int = 2
    steps: int = 3000
    batch_size: int = 64
    lr: float = 2e-3
    warmup_steps: int = 100
    weight_decay: float = 1e-3
    max_length: int = 96
    max_answer_length: int = 12
    template: str = DEFAULT_TEMPLATE
    eval_every: int = 500
    n_eval: int = 128
    seed: int = 0
    threads: int = 1


def vocab_pieces(tokenizer) -> list[str]:
    """Lower-case alphabetic word-continuation pieces of a byte-level BPE vocabulary, for
    spelling names the reader must learn to copy (word-initial pieces are left out: in the demo
    tokenizer they are whole demo-world names)."""
    return [t for t in tokenizer.get_vocab() if t.isascii() and t.isalpha() and t.islower() and len(t) >= 2]


def build_reader(cfg: PretrainConfig, tokenizer):
    from rerag.models.loading import ModelSpec, build_model

    spec = ModelSpec(
        config={
            "model_type": cfg.model_type,
            "d_model": cfg.d_model,
            "d_ff": cfg.d_ff,
            "d_kv": cfg.d_kv,
            "num_heads": cfg.num_heads,
            "num_layers": cfg.num_layers,
            "num_decoder_layers": cfg.num_decoder_layers,
            "dropout_rate": 0.0,
        }
    )
    return build_model(spec, tokenizer)


def encode(generator, examples: list[dict], template: str, max_length: int) -> dict:
    texts = format_pairs(template, [e["question"] for e in examples], examples)
    enc = generator.tokenizer(texts, max_length=max_length, truncation=True, padding=True, return_tensors="pt")
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "labels": generator.encode_answers([e["answers"][0] for e in examples]),
    }


@torch.no_grad()
def evaluate_em(generator, examples: list[dict], template: str, max_length: int, batch_size: int = 64) -> float:
    """Greedy exact match of the reader given each example's own passage."""
    was_training = generator.training
    generator.eval()
    hits = 0
    for i in range(0, len(examples), batch_size):
        chunk = examples[i : i + batch_size]
        batch = encode(generator, chunk, template, max_length)
        preds, _ = generator.generate(batch["input_ids"], batch["attention_mask"])
        hits += sum(exact_match(p, e["answers"]) for p, e in zip(preds, chunk))
    generator.train(was_training)
    return hits / max(len(examples), 1)


def pretrain(
    cfg: PretrainConfig,
    corpus_cfg: CorpusConfig | None = None,
    log=print,
    eval_sets: dict[str, list[dict]] | None = None,
) -> tuple[object, list[dict]]:
    """Train the reader; return the Generator and the log rows (step, loss, EM per eval set)."""
    from erag.lm import load_tokenizer
    from rerag.models.generator import Generator

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    tokenizer = load_tokenizer(cfg.tokenizer)
    corpus = ReadingCorpus(corpus_cfg or CorpusConfig(), vocab_pieces(tokenizer))
    generator = Generator(build_reader(cfg, tokenizer), tokenizer, cfg.max_answer_length, cfg.template, cfg.max_length)
    generator.train()
    eval_sets = {"heldout": corpus.examples(cfg.n_eval, seed=cfg.seed + 1_000_003), **(eval_sets or {})}
    opt = torch.optim.AdamW(generator.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def lr_at(step: int) -> float:  # linear warmup, cosine decay to 10%
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        t = (step - cfg.warmup_steps) / max(cfg.steps - cfg.warmup_steps, 1)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    rng = random.Random(cfg.seed)
    rows, running, start = [], 0.0, time.time()
    for step in range(1, cfg.steps + 1):
        batch = encode(generator, [corpus.sample(rng) for _ in range(cfg.batch_size)], cfg.template, cfg.max_length)
        loss = generator.model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(generator.parameters(), 1.0)
        opt.step()
        sched.step()
        running += loss.item()
        if step % cfg.eval_every == 0 or step == cfg.steps:
            row = {
                "step": step,
                "minutes": round((time.time() - start) / 60, 2),
                "loss": round(running / (cfg.eval_every if step % cfg.eval_every == 0 else step % cfg.eval_every), 4),
            }
            for name, exs in eval_sets.items():
                row[f"em_{name}"] = round(evaluate_em(generator, exs, cfg.template, cfg.max_length), 4)
            rows.append(row)
            log(json.dumps(row))
            running = 0.0
    generator.eval()
    return generator, rows


def save_reader(generator, cfg: PretrainConfig, corpus_cfg: CorpusConfig, rows: list[dict]) -> Path:
    """Write the reader as a generator folder (`Generator.from_pretrained` reads it; so does
    `ModelSpec(name_or_path=...)`) with `pretraining.json`: the settings and the log."""
    out = Path(cfg.out_dir)
    generator.save_pretrained(out)
    with open(out / "pretraining.json", "w") as f:
        json.dump(
            {"command": "rerag pretrain", "pretrain": asdict(cfg), "corpus": asdict(corpus_cfg), "log": rows},
            f,
            indent=1,
        )
    return out


def pretrain_command(*, reader: PretrainConfig = PretrainConfig(), corpus: CorpusConfig = CorpusConfig()) -> None:
    """Pretrain the copy-head reader the demo's generator starts from.

    Args:
        reader: the reader's size and training run (`rerag.demo.reader_pretraining.PretrainConfig`).
        corpus: the synthetic reading corpus (`rerag.demo.reader_pretraining.CorpusConfig`).
    """
    generator, rows = pretrain(reader, corpus)
    print(save_reader(generator, reader, corpus, rows))
