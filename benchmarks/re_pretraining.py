"""Would an RE that starts out reading hold over the top 100? Pretrain the demo's RE on a disjoint world.

The demo's RE starts from random weights, where the paper's starts from a pretrained T5, and over
BM25's top 100 it does not learn to tell the asked person from others who share the first name and
the relation (BENCHMARKS.md, re_depth.py), though its teacher does. The shipped reader starts
pretrained on `rerag.demo.reader_pretraining`'s corpus, which shares no names, relations or
templates with the demo world; this script pretrains the demo's RE shape on that same corpus, for
relevance: per question a group of passages, the one stating the asked fact first, then passages
stating the same relation about entities that share the first word of the asked one's name, passages
about the asked entity's other facts, and random passages. The objective is RE-RAG's own (eq. 12,
`rerag_loss`) with a teacher that knows the answer (F = 0 on the answer's passage, -30 elsewhere).
The demo world's questions and labels are never seen. Prints held-out group accuracy by step,
then accuracy against each kind of passage alone (groups of the answer's passage and two of one
kind), and writes a model folder that `re_depth.py --estimator` starts from (BENCHMARKS.md):

    python benchmarks/re_pretraining.py --lr 5e-4 --steps 5000 --eval-every 1000 --out outputs/re_pretrained_long
    python benchmarks/re_depth.py --estimator outputs/re_pretrained_long --lr 5e-4 \\
        --scores outputs/re_depth_F600.pt --strategies 12+8 --steps 1200 --eval-every 300
"""
from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from pathlib import Path

import torch
import yaml
from erag.lm import load_tokenizer

from rerag.demo.reader_pretraining import CorpusConfig, ReadingCorpus, vocab_pieces
from rerag.losses import rerag_loss
from rerag.models.estimator import RelevanceEstimator
from rerag.models.loading import ModelSpec, build_model

ROOT = Path(__file__).resolve().parent.parent
MISS = -30.0  # the teacher's F on a passage without the answer: Q_G is one-hot on the answer's passage


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml", help="the RE's shape, template, lr")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch", type=int, default=16, help="questions per step")
    p.add_argument("--groups", default="2,2,3", help="namesake, same-entity and random passages per question")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: the config's)")
    p.add_argument("--init", default=None, help="model to start from, e.g. rerag:assets/reader (default: the config's random init)")
    p.add_argument("--piece-names", type=float, default=0.0,
                   help="share of entity names respelled from the RE tokenizer's word pieces (default 0: the corpus's syllables)")
    args = p.parse_args()
    model = yaml.safe_load(args.config.read_text())["model"]
    torch.manual_seed(args.seed)
    tokenizer = load_tokenizer(model["re_tokenizer"])
    spec = ModelSpec(name_or_path=args.init) if args.init else ModelSpec(config=model["estimator"]["config"])
    estimator = RelevanceEstimator(build_model(spec, tokenizer), tokenizer,
                                   model["true_word"], model["false_word"], model["re_template"], model["re_max_length"])
    corpus = ReadingCorpus(CorpusConfig(), vocab_pieces(tokenizer))
    if args.piece_names:
        corpus.entities = respell_entities(corpus.entities, tokenizer, args.piece_names, random.Random(args.seed))
    n_entity, n_relation, n_random = map(int, args.groups.split(","))
    sampler = GroupSampler(corpus, n_entity, n_relation, n_random)
    heldout = [sampler(random.Random(f"heldout:{i}")) for i in range(200)]
    optimizer = torch.optim.AdamW(estimator.parameters(), lr=args.lr or model["lr"], weight_decay=model["weight_decay"])
    rng, start, losses = random.Random(args.seed), time.time(), []
    print(f"step 0: held-out accuracy {accuracy(estimator, heldout):.3f}", flush=True)
    for step in range(1, args.steps + 1):
        groups = [sampler(rng) for _ in range(args.batch)]
        k = len(groups[0][1])
        enc = estimator.encode([q for q, ps in groups for _ in ps], [c for _, ps in groups for c in ps])
        log_p_true, log_p_false = estimator.true_false_logprobs(enc["input_ids"], enc["attention_mask"])
        teacher = torch.full((len(groups), k), MISS)
        teacher[:, 0] = 0.0
        loss = rerag_loss(log_p_true.view(-1, k), log_p_false.view(-1, k), teacher, model["alpha_re"],
                          model["alpha_tok"], model["kl_direction"])["loss"]
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(estimator.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if step % args.eval_every == 0 or step == args.steps:
            print(f"step {step}: {(time.time() - start) / 60:.1f} min, loss {sum(losses) / len(losses):.3f}, "
                  f"held-out accuracy {accuracy(estimator, heldout):.3f}", flush=True)
            losses = []
    for kind, sizes in (("namesakes", (2, 0, 0)), ("same entity", (0, 2, 0)), ("random", (0, 0, 2))):
        groups = [GroupSampler(corpus, *sizes)(random.Random(f"h:{i}")) for i in range(200)]
        print(f"accuracy against {kind} alone (chance 0.33): {accuracy(estimator, groups):.3f}", flush=True)
    estimator.model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(args.out)


def respell_entities(entities: list[str], tokenizer, share: float, rng: random.Random) -> list[str]:
    """`entities` with `share` of them renamed from the tokenizer's pieces: a capitalized
    word-initial piece and continuation pieces, first names drawn from a pool of 100 so that
    namesakes remain. The corpus's syllables cover about 60% of the demo world's name tokens;
    pieces let the RE learn to compare every name token (an embedding never trained cannot be matched)."""
    vocab = sorted(tokenizer.get_vocab())
    heads = [t[1:] for t in vocab if t.startswith("Ġ") and t[1:].isascii() and t[1:].isalpha() and t[1].isupper() and len(t) <= 5]
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
    """(question, passages) groups from the reading corpus, the answer's passage first."""

    def __init__(self, corpus: ReadingCorpus, n_entity: int, n_relation: int, n_random: int):
        self.corpus, self.n_entity, self.n_relation, self.n_random = corpus, n_entity, n_relation, n_random
        self.namesakes: dict[str, list[str]] = defaultdict(list)
        for entity in corpus.entities:
            self.namesakes[entity.split(" ")[0]].append(entity)

    def __call__(self, rng: random.Random) -> tuple[str, list[dict]]:
        c = self.corpus
        entity, rel = rng.choice(c.entities), rng.choice(c.relations)
        positive = c.sample(rng, entity, rel)
        others = [e for e in self.namesakes[entity.split(" ")[0]] if e != entity] or c.entities
        passages = [positive]
        passages += [c.sample(rng, rng.choice(others), rel) for _ in range(self.n_entity)]
        passages += [c.sample(rng, entity, rng.choice([r for r in c.relations if r != rel]))
                     for _ in range(self.n_relation)]
        passages += [c.sample(rng) for _ in range(self.n_random)]
        return positive["question"], passages


@torch.no_grad()
def accuracy(estimator: RelevanceEstimator, groups: list[tuple[str, list[dict]]]) -> float:
    """Share of groups whose top-scored passage is the answer's."""
    estimator.eval()
    hits = sum(int(estimator.score(q, ps).argmax()) == 0 for q, ps in groups)
    estimator.train()
    return hits / len(groups)


if __name__ == "__main__":
    main()
