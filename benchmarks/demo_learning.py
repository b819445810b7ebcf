"""Does the embedded default learn, on its own world and on one the project did not generate?

Runs `rerag fit --config configs/demo.yaml` unchanged on the synthetic world it ships with, and
the same config pointed at a world the project's generator did not make (the foreign world below:
ships, harbours, captains; other names, relations and templates), then prints, per world, the wall
time and the test split's RE Recall@1 against BM25's (the retriever order) and RE-RAG's exact match
against the retriever-order baseline's. Each run writes its checkpoints, `test_metrics.json` and
`learning_curve.png` under `--out/<world>`.

The foreign world (written to `--data-root/foreign` when its files are missing) is a QA world of
sailing ships, harbours, captains, shipyards, launch years and cargo, written independently of
`rerag.demo.world` (other entities, relations, name generator, question phrasings and sentence
templates). Each ship has five facts. Each fact is written into one 3-sentence passage (the fact
sentence among two fillers), except ~15% that are left out of the corpus (unanswerable questions).
Each (ship, relation) also gets two hard negatives: a passage naming the ship and the relation's
words with a wrong value of the same type, and one naming them with no value at all. Ships are
split into disjoint train/dev/test sets; BM25 (bm25s) over "title text" gives each question its
contexts (top-20 for train, top-100 for dev/test) in FiD format.

    OMP_NUM_THREADS=2 python benchmarks/demo_learning.py             # both worlds, one after the other
    python benchmarks/demo_learning.py --worlds foreign --extra --trainer.max_steps=300   # a quick look
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import subprocess
import sys
import time
from pathlib import Path

import bm25s
import numpy as np

ROOT = Path(__file__).resolve().parent.parent

# --- the foreign world ---------------------------------------------------------------------------

SPLITS = {"train": (500, 20), "dev": (30, 100), "test": (60, 100)}  # ships, contexts per question
DROP_RATE = 0.15
CARGOES = [
    "salt",
    "copper ore",
    "indigo",
    "timber",
    "wool",
    "tea",
    "tobacco",
    "sugar",
    "rum",
    "cotton",
    "iron nails",
    "whale oil",
    "cloves",
    "grain",
    "coffee",
]
# relation -> question phrasings, fact templates (answer at start / middle / end),
# wrong-value distractor template ({w} = wrong value), no-value distractor template.
RELATIONS: dict[str, dict] = {
    "home_harbour": dict(
        q=["Which harbour is the {s} registered in?", "What is the home port of the {s}?", "Where is the {s} based?"],
        fact=[
            "{v} is the home harbour of the {s}.",
            "The {s} is registered in {v} and flies that harbour's pennant.",
            "Harbour records list the home port of the {s} as {v}.",
        ],
        wrong="The {s} once sheltered from a gale in the harbour of {w}, far from its home port.",
        none="The register that named the home harbour of the {s} was lost in a fire.",
    ),
    "captain": dict(
        q=["Who captained the {s}?", "Who was the master of the {s}?", "Which captain commanded the {s}?"],
        fact=[
            "{v} captained the {s} for many seasons.",
            "The {s} was commanded by {v} on every voyage of note.",
            "The master of the {s} was {v}.",
        ],
        wrong="The {s} was once inspected by {w}, who later captained a rival vessel.",
        none="Nobody now remembers which captain commanded the {s} in its later years.",
    ),
    "shipyard": dict(
        q=["Which shipyard built the {s}?", "Where was the {s} built?", "What yard constructed the {s}?"],
        fact=[
            "{v} built the {s} from seasoned planking.",
            "The {s} was built at {v} over two long winters.",
            "The yard that constructed the {s} was {v}.",
        ],
        wrong="After a collision the {s} was repaired at {w}, a shipyard that never built her.",
        none="The shipyard that built the {s} kept no plans, and its name was never written down.",
    ),
    "launch_year": dict(
        q=[
            "In what year was the {s} launched?",
            "When was the {s} launched?",
            "What year did the {s} first take to the water?",
        ],
        fact=[
            "{v} was the year the {s} was launched.",
            "The {s} was launched in {v} before a cheering crowd.",
            "The {s} first took to the water in {v}.",
        ],
        wrong="The {s} was refitted in {w}, many years after it was launched.",
        none="The year the {s} was launched is disputed among harbour clerks.",
    ),
    "cargo": dict(
        q=[
            "What cargo did the {s} usually carry?",
            "What goods did the {s} haul?",
            "What was the main cargo of the {s}?",
        ],
        fact=[
            "{v} was the usual cargo of the {s}.",
            "The {s} hauled {v} between distant markets.",
            "The main cargo carried by the {s} was {v}.",
        ],
        wrong="Customs officers once searched the {s} for smuggled {w}, but its cargo was clean.",
        none="The cargo manifests of the {s} were never kept by its owners.",
    ),
}
FILLERS = [
    "Her hull was tarred twice a year against shipworm.",
    "The crew sang shanties while heaving at the capstan.",
    "A squall off {h} once split her foremast.",
    "She was known for running fast before a westerly wind.",
    "Merchants in {h} spoke well of her punctual arrivals.",
    "Her deck was scrubbed with sand every morning.",
    "Pilots from {h} guided her through the shoals more than once.",
    "The ship's cat was a favourite of every sailor aboard.",
    "Her logbooks were kept in a sealed oak chest.",
    "She once waited three weeks in {h} for a favourable tide.",
]
ONSETS = [
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "sk",
    "st",
    "t",
    "tr",
    "v",
    "w",
]
VOWELS = ["a", "e", "i", "o", "u", "ae", "ou", "ei"]
CODAS = ["", "", "n", "r", "l", "s", "th", "nd", "rk", "ck"]
HARBOUR_ENDS = ["", "", "mouth", "wick", "haven", "sby"]


def normalize(text: str) -> str:
    text = text.lower().translate(str.maketrans("", "", string.punctuation))
    return " ".join(w for w in text.split() if w not in {"a", "an", "the"})


def contains(answers: list[str], text: str) -> bool:
    padded = f" {normalize(text)} "
    return any(f" {normalize(a)} " in padded for a in answers)


class Namer:
    """Unique title-case words: onset+vowel(+onset+vowel)+coda, never an English template word."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        templates = " ".join(
            [*CARGOES, *FILLERS]
            + [t for r in RELATIONS.values() for v in r.values() for t in (v if isinstance(v, list) else [v])]
        )
        self.used = set(re.findall(r"[a-z]+", templates.lower())) | {"port", "captain", "yard"}

    def word(self, ending: str = "") -> str:
        while True:
            parts = [self.rng.choice(ONSETS), self.rng.choice(VOWELS)]
            if self.rng.random() < 0.6:
                parts += [self.rng.choice(ONSETS), self.rng.choice(VOWELS)]
            w = "".join(parts) + self.rng.choice(CODAS) + ending
            if len(w) >= 4 and w not in self.used:
                self.used.add(w)
                return w.title()


def build_world(rng: random.Random) -> tuple[list[dict], list[dict]]:
    """Return (ships with their facts as answer lists, corpus passages)."""
    namer = Namer(rng)
    harbours = [namer.word(rng.choice(HARBOUR_ENDS)) for _ in range(40)]
    captains = [f"{namer.word()} {namer.word()}" for _ in range(300)]
    yards = [f"{namer.word()} Yard" for _ in range(25)]
    pools: dict[str, list[list[str]]] = {
        "home_harbour": [[h, f"Port {h}"] for h in harbours],
        "captain": [[c, f"Captain {c}"] for c in captains],
        "shipyard": [[y, y.removesuffix(" Yard")] for y in yards],
        "launch_year": [[str(y)] for y in range(1700, 1851)],
        "cargo": [[c] for c in CARGOES],
    }
    ships, corpus = [], []
    for _ in range(sum(n for n, _ in SPLITS.values())):
        name = f"{namer.word()} {namer.word()}"
        facts = {rel: rng.choice(pool) for rel, pool in pools.items()}
        ships.append({"name": name, "facts": facts})

        def passage(sentence: str) -> None:
            fill = [
                f.format(h=rng.choice([h for h in harbours if h != facts["home_harbour"][0]]))
                for f in rng.sample(FILLERS, 2)
            ]
            fill.insert(rng.randrange(3), sentence[0].upper() + sentence[1:])
            corpus.append({"id": f"p{len(corpus)}", "title": name, "text": " ".join(fill)})

        for rel, spec in RELATIONS.items():
            answers = facts[rel]
            if rng.random() >= DROP_RATE:
                passage(rng.choice(spec["fact"]).format(s=name, v=answers[0]))
            wrong = rng.choice(pools[rel])[0]
            for template in ([spec["wrong"]] if wrong != answers[0] else []) + [spec["none"]]:
                passage(template.format(s=name, w=wrong))
                assert not contains(answers, f"{name} {corpus[-1]['text']}"), corpus[-1]
    return ships, corpus


def write_foreign_world(out: Path, seed: int = 0) -> None:
    """Write the foreign world into `out`: corpus.jsonl and FiD {train,dev,test}.jsonl (BM25's
    contexts, `has_answer` marked), and print each split's BM25 recall."""
    start = time.perf_counter()
    rng = random.Random(seed)
    ships, corpus = build_world(rng)
    order = list(range(len(ships)))
    rng.shuffle(order)

    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([f"{p['title']} {p['text']}" for p in corpus], show_progress=False), show_progress=False
    )
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w") as f:
        f.writelines(json.dumps(p) + "\n" for p in corpus)

    print(f"{'split':<6} {'questions':>9} {'any_has_answer':>14} {'R@1':>6} {'R@5':>6} {'R@20':>6}")
    offset = 0
    for split, (n_ships, k) in SPLITS.items():
        records = []
        for ship_idx in order[offset : offset + n_ships]:
            ship = ships[ship_idx]
            for rel, spec in RELATIONS.items():
                records.append(
                    {
                        "id": f"{split}-{len(records)}",
                        "relation": rel,
                        "question": rng.choice(spec["q"]).format(s=ship["name"]),
                        "answers": ship["facts"][rel],
                    }
                )
        offset += n_ships
        doc_ids, scores = retriever.retrieve(
            bm25s.tokenize([r["question"] for r in records], show_progress=False), k=k, show_progress=False, n_threads=1
        )
        hits = np.zeros((len(records), k), dtype=bool)
        for i, rec in enumerate(records):
            rec["ctxs"] = []
            for j, (d, s) in enumerate(zip(doc_ids[i], scores[i])):
                p = corpus[int(d)]
                hits[i, j] = contains(rec["answers"], f"{p['title']} {p['text']}")
                rec["ctxs"].append({**p, "score": float(s), "has_answer": bool(hits[i, j])})
        with open(out / f"{split}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
        recall = [hits[:, :c].any(1).mean() for c in (1, 5, 20)]
        print(f"{split:<6} {len(records):>9} {hits.any(1).mean():>14.3f} " + " ".join(f"{r:>6.3f}" for r in recall))
    print(f"{len(corpus)} passages written to {out} in {time.perf_counter() - start:.1f}s")


# --- the runs ------------------------------------------------------------------------------------


def world_config(world: str, out: Path, data_root: Path) -> list[str]:
    """`rerag fit` arguments: configs/demo.yaml with its outputs moved under `out` (a copy written
    there), pointed at `world`'s files."""
    out.mkdir(parents=True, exist_ok=True)
    config = out / "config.yaml"
    config.write_text((ROOT / "configs" / "demo.yaml").read_text().replace("outputs/demo", str(out)))
    args = ["--config", str(config)]
    if world == "demo":
        return args + [f"--data.data_dir={data_root / 'demo'}"]
    folder = data_root / "foreign"
    if not (folder / "test.jsonl").is_file():
        write_foreign_world(folder)
    return args + [
        "--data.demo=null",
        f"--data.train_file={folder / 'train.jsonl'}",
        f"--data.val_file={folder / 'dev.jsonl'}",
        f"--data.test_file={folder / 'test.jsonl'}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="demo,foreign", help="comma-separated: demo, foreign")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "demo_learning")
    parser.add_argument("--data-root", type=Path, default=ROOT / "data", help="where both worlds' files live")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `rerag fit` arguments")
    args = parser.parse_args()
    rows = []
    for world in args.worlds.split(","):
        out = args.out / world
        command = [
            sys.executable,
            "-m",
            "rerag",
            "fit",
            *world_config(world, out, args.data_root),
            "--trainer.enable_progress_bar=false",
            *args.extra,
        ]
        start = time.time()
        subprocess.run(command, check=True, cwd=ROOT)
        metrics = json.loads((out / "test_metrics.json").read_text())
        rows.append((world, (time.time() - start) / 60, metrics))
    print("\n| world | minutes | steps | RE Recall@1 | BM25 Recall@1 | RE-RAG EM | retriever-order EM |")
    print("|---|---|---|---|---|---|---|")
    for world, minutes, m in rows:
        print(
            f"| {world} | {minutes:.1f} | {m['global_step']} | {m['test/re_recall@1']:.3f} | "
            f"{m['test/retriever_recall@1']:.3f} | {m['test/em']:.3f} | {m['test/em_retriever_order']:.3f} |"
        )


if __name__ == "__main__":
    main()
