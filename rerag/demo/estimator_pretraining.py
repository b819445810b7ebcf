"""Relevance pretraining: teach the demo's tiny RE to tell the passage that states the asked fact
from passages about namesakes, about the asked entity's other facts and about anything else, so
that it starts out reading as the paper's RE starts from a pretrained T5.

From random init the demo's RE does not learn, inside RE-RAG, to tell the asked person from others
who share the first name and the relation, so over BM25's top 100 it fails though its teacher does
not (docs/demo.md, "The demo's RE"). This module trains
the demo's RE shape on the reader's pretraining corpus (`rerag.demo.reader_pretraining`), which
shares no relations, templates or facts with the demo world: per question a group of passages, the
one stating the asked fact first, then the same relation about entities whose name starts with the
same word, the asked entity's other facts, and random passages. The objective is RE-RAG's own
(eq. 12, `rerag_loss`) with a teacher that knows the answer (F = 0 on the answer's passage, -30
elsewhere); the demo world's questions and labels are never seen. Optionally (`alpha_anchor`,
`answerless`) it also learns absolute relevance, as monoT5-style rerankers are trained pointwise:
BCE of sigmoid(s) against "states the asked fact", with a share of groups whose answer's passage is
replaced by another namesake's, so that a namesake scores low even where nothing outranks it.
`rerag pretrain-estimator` runs it and writes an RE folder; the one shipped as `rerag/assets/relevance_estimator` is what
configs/demo.yaml starts from.
"""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from rerag.demo.reader_pretraining import CorpusConfig, ReadingCorpus, vocab_pieces
from rerag.losses import rerag_loss
from rerag.metrics import auroc
from rerag.prompts import DEFAULT_TEMPLATE

MISS = -30.0  # the teacher's F on a passage without the answer: Q_G is one-hot on the answer's passage


@dataclass
class EstimatorPretrainConfig:
    """The RE's shape (configs/demo.yaml's) and its pretraining run (the shipped asset's settings)."""

    out_dir: str = "outputs/relevance_estimator"
    tokenizer: str = "rerag:assets/demo_tokenizer"
    model: dict = field(
        default_factory=lambda: {
            "model_type": "t5",
            "d_model": 64,
            "d_ff": 128,
            "d_kv": 16,
            "num_heads": 4,
            "num_layers": 2,
            "num_decoder_layers": 1,
            "dropout_rate": 0.0,
        }
    )
    init: str | None = None  # a model folder to start from instead of random init, e.g. rerag:assets/reader
    template: str = DEFAULT_TEMPLATE
    max_length: int = 192
    true_word: str = "true"
    false_word: str = "false"
    alpha_re: float = 1.0
    alpha_tok: float = 1.0
    kl_direction: str = "generator_to_re"
    alpha_anchor: float = 0.0  # weight of BCE(sigmoid(s), states the asked fact) (`rerag.losses.has_answer_anchor`)
    answerless: float = 0.0  # share of groups whose answer's passage is swapped for another namesake's
    steps: int = 8000
    batch_size: int = 16  # questions (groups) per step
    groups: tuple[int, int, int] = (2, 2, 3)  # namesake, same-entity and random passages per question
    piece_names: float = 0.7  # share of entity names respelled from the tokenizer's word pieces
    lr: float = 5e-4  # AdamW, constant (at the demo's 2e-3 namesakes stay at chance)
    weight_decay: float = 1e-3
    eval_every: int = 1000
    n_eval: int = 200
    seed: int = 0

    def __post_init__(self):
        if not 0.0 <= self.answerless <= 1.0:
            raise ValueError(f"estimator.answerless is a share of groups, in [0, 1]: got {self.answerless}")


def respell_entities(entities: list[str], tokenizer, share: float, rng: random.Random) -> list[str]:
    """`entities` with `share` of them renamed from the tokenizer's pieces: a capitalized
    word-initial piece and continuation pieces, first names drawn from a pool of 100 so that
    namesakes remain. The corpus's syllables cover only part of the demo world's name tokens;
    pieces let the RE learn to compare every name token (an embedding never trained cannot be matched)."""
    vocab = sorted(tokenizer.get_vocab())
    heads = [
        t[1:]
        for t in vocab
        if t.startswith("Ġ") and t[1:].isascii() and t[1:].isalpha() and t[1].isupper() and len(t) <= 5
    ]
    tails = [t for t in vocab if t.isascii() and t.isalpha() and t.islower() and len(t) <= 3]

    def name(parts: int) -> str:
        return rng.choice(heads) + "".join(rng.choice(tails) for _ in range(parts))

    firsts = [name(1) for _ in range(100)]
    renamed: set[str] = set()
    for entity in entities:
        *prefix, last = entity.split(" ")
        if rng.random() < share:
            if prefix and prefix[0] not in ("the", "Captain"):  # a person: first name from the pool
                prefix = [rng.choice(firsts)]
            last = name(rng.choice((1, 2)))
        renamed.add(" ".join([*prefix, last]))
    return sorted(renamed)


class GroupSampler:
    """(question, passages) groups from the reading corpus, the answer's passage first; in a share
    `answerless` of them a namesake's passage of the same relation stands in its place."""

    def __init__(self, corpus: ReadingCorpus, n_entity: int, n_relation: int, n_random: int, answerless: float = 0.0):
        self.corpus, self.n_entity, self.n_relation, self.n_random = corpus, n_entity, n_relation, n_random
        self.answerless = answerless
        self.namesakes: dict[str, list[str]] = defaultdict(list)
        for entity in corpus.entities:
            self.namesakes[entity.split(" ")[0]].append(entity)

    def __call__(self, rng: random.Random) -> tuple[str, list[dict]]:
        c = self.corpus
        entity, rel = rng.choice(c.entities), rng.choice(c.relations)
        positive = c.sample(rng, entity, rel)
        others = [e for e in self.namesakes[entity.split(" ")[0]] if e != entity] or c.entities
        # no draw when answerless is 0, so a seed gives the groups it gave before the option existed
        n_entity = self.n_entity + (self.answerless > 0 and rng.random() < self.answerless)
        passages = [] if n_entity > self.n_entity else [positive]
        passages += [c.sample(rng, rng.choice(others), rel) for _ in range(n_entity)]
        passages += [
            c.sample(rng, entity, rng.choice([r for r in c.relations if r != rel])) for _ in range(self.n_relation)
        ]
        passages += [c.sample(rng) for _ in range(self.n_random)]
        return positive["question"], passages


def states_the_fact(question: str, passages: list[dict]) -> torch.Tensor:
    """1 for the passage written for `question` (the answer's), 0 for the rest: the anchor's label."""
    return torch.tensor([float(p["question"] == question) for p in passages])


@torch.no_grad()
def accuracy(estimator, groups: list[tuple[str, list[dict]]]) -> float:
    """Share of groups whose top-scored passage is the answer's."""
    was_training = estimator.training
    estimator.eval()
    hits = sum(int(estimator.score(q, ps).argmax()) == 0 for q, ps in groups)
    estimator.train(was_training)
    return hits / len(groups)


@torch.no_grad()
def answer_auroc(estimator, groups: list[tuple[str, list[dict]]]) -> float:
    """AUROC of max_j s for "the group holds the answer's passage": the set-level confidence's
    separation (the calibrated confidence's target), on groups of which some lack the answer."""
    was_training = estimator.training
    estimator.eval()
    confidence = [float(estimator.score(q, ps).max()) for q, ps in groups]
    estimator.train(was_training)
    return auroc(confidence, [bool(states_the_fact(q, ps).any()) for q, ps in groups])


def pretrain_estimator(cfg: EstimatorPretrainConfig, log=print):
    """Train the RE; return it and the log rows (step, loss, held-out accuracy, held-out AUROC of
    max_j s on groups of which half lack the answer (`answer_auroc`); at the end accuracy
    against each kind of passage alone, in groups of the answer's passage and two of that kind)."""
    from erag.lm import load_tokenizer
    from rerag.models.estimator import RelevanceEstimator
    from rerag.models.loading import ModelSpec, build_model

    torch.manual_seed(cfg.seed)
    tokenizer = load_tokenizer(cfg.tokenizer)
    spec = ModelSpec(name_or_path=cfg.init) if cfg.init else ModelSpec(config=dict(cfg.model))
    estimator = RelevanceEstimator(
        build_model(spec, tokenizer), tokenizer, cfg.true_word, cfg.false_word, cfg.template, cfg.max_length
    )
    estimator.train()
    corpus = ReadingCorpus(CorpusConfig(), vocab_pieces(tokenizer))
    if cfg.piece_names:
        corpus.entities = respell_entities(corpus.entities, tokenizer, cfg.piece_names, random.Random(cfg.seed))
    sampler = GroupSampler(corpus, *cfg.groups, answerless=cfg.answerless)
    heldout = [GroupSampler(corpus, *cfg.groups)(random.Random(f"heldout:{i}")) for i in range(cfg.n_eval)]
    mixed = [GroupSampler(corpus, *cfg.groups, answerless=0.5)(random.Random(f"mixed:{i}")) for i in range(cfg.n_eval)]
    optimizer = torch.optim.AdamW(estimator.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng, start, losses = random.Random(cfg.seed), time.time(), []
    rows = [
        {
            "step": 0,
            "heldout_accuracy": accuracy(estimator, heldout),
            "heldout_auroc": round(answer_auroc(estimator, mixed), 3),
        }
    ]
    log(json.dumps(rows[-1]))
    for step in range(1, cfg.steps + 1):
        groups = [sampler(rng) for _ in range(cfg.batch_size)]
        k = len(groups[0][1])
        enc = estimator.encode([q for q, ps in groups for _ in ps], [c for _, ps in groups for c in ps])
        log_p_true, log_p_false = estimator.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
        labels = torch.stack([states_the_fact(q, ps) for q, ps in groups])
        teacher = torch.where(labels.bool(), 0.0, MISS)
        loss = rerag_loss(
            log_p_true.view(-1, k),
            log_p_false.view(-1, k),
            teacher,
            cfg.alpha_re,
            cfg.alpha_tok,
            cfg.kl_direction,
            cfg.alpha_anchor,
            labels,
        )["loss"]
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(estimator.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if step % cfg.eval_every == 0 or step == cfg.steps:
            rows.append(
                {
                    "step": step,
                    "minutes": round((time.time() - start) / 60, 2),
                    "loss": round(sum(losses) / len(losses), 4),
                    "heldout_accuracy": accuracy(estimator, heldout),
                    "heldout_auroc": round(answer_auroc(estimator, mixed), 3),
                }
            )
            log(json.dumps(rows[-1]))
            losses = []
    kinds = {"namesakes": (2, 0, 0), "same_entity": (0, 2, 0), "random": (0, 0, 2)}
    final = {
        f"accuracy_vs_{kind}": accuracy(
            estimator, [GroupSampler(corpus, *sizes)(random.Random(f"h:{i}")) for i in range(cfg.n_eval)]
        )
        for kind, sizes in kinds.items()
    }  # chance 0.33 each
    rows.append(final)
    log(json.dumps(final))
    estimator.eval()
    return estimator, rows


def save_estimator(estimator, cfg: EstimatorPretrainConfig, rows: list[dict]) -> Path:
    """Write the RE's model as a folder `ModelSpec(name_or_path=...)` reads, with `pretraining.json`:
    the settings and the log, and, when the run started from a pretrained RE (`init`), that RE's own
    `pretraining.json` under `init_pretraining`, so a chain of runs stays on record."""
    from erag.lm import resolve

    out = Path(cfg.out_dir)
    init_record = Path(resolve(cfg.init)) / "pretraining.json" if cfg.init else None
    record = {"command": "rerag pretrain-estimator", "pretrain": asdict(cfg), "log": rows}
    if init_record is not None and init_record.exists():  # read before `out` may overwrite it
        record["init_pretraining"] = json.loads(init_record.read_text())
    estimator.model.save_pretrained(out)
    with open(out / "pretraining.json", "w") as f:
        json.dump(record, f, indent=1)
    return out


def pretrain_estimator_command(*, estimator: EstimatorPretrainConfig | None = None) -> None:
    """Pretrain the tiny RE the demo starts from, for relevance on the reader's corpus.

    Args:
        estimator: the RE's shape and training run (`rerag.demo.estimator_pretraining.EstimatorPretrainConfig`).
    """
    estimator = estimator or EstimatorPretrainConfig()
    model, rows = pretrain_estimator(estimator)
    print(save_estimator(model, estimator, rows))
