"""More training questions without a writer: cloze questions cut from the training articles' passages.

The frozen-teacher RE sees 328 SQuAD questions (three training articles), three times each, and its
dev Recall@1 falls after about two passes. SmolLM2-135M does not write usable questions (asked for one
about a passage it mostly writes "What is the answer to this question?"), so this builder writes them
by rule, as unsupervised QA does (Lewis et al., 2019, "Unsupervised Question Answering by Cloze
Translation": a noun phrase or number of a sentence is the answer, the words around it, with a
wh-word in its place, the question). For each sentence of each training-article passage (at least
`--min-words` words) one answer candidate is drawn: a number or date ("When" for a year, else
"How many") or a capitalized phrase not at the sentence's start ("What"); the question is the wh-word
followed by up to `--clause-words` words on each side of the answer, the answer removed.
BM25 (make-squad's, over the same corpus) gives each cloze question its top contexts, with `has_answer`
and `gold` (the passage it was cut from) as make-squad writes them; the teacher scores them through the
same cache as the real questions, and no label reaches the loss.

    python benchmarks/cloze_questions.py --squad data/squad --out data/squad_cloze
    rerag fit --config configs/squad_smollm2_teacher.yaml --data.init_args.train_file data/squad_cloze/train.jsonl

OUT/train.jsonl holds make-squad's training questions followed by the cloze ones (ids `cloze-...`).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from eor.corpus import Passage, load_corpus
from eor.retrievers import BM25Retriever
from rerag.data.fid_format import read_fid
from rerag.data.squad import fid_record, sentence_starts
from rerag.defaults import TRAIN_CONTEXTS

YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
NUMBER = re.compile(r"\b\d[\d,.]*(?![\w])(?:\s(?:per cent|percent|million|billion|thousand))?")
CAPITALIZED = re.compile(r"\b[A-Z][\w-]+(?:\s(?:of\s|the\s|de\s|and\s)?[A-Z][\w-]+)*(?!['\w])")


def candidates(sentence: str) -> list[tuple[int, int, str]]:
    """(start, end, wh-word) of each answer candidate in `sentence`: numbers, then capitalized phrases
    that do not open it."""
    found = []
    for m in NUMBER.finditer(sentence):
        span = m.group(0).rstrip(".,")
        found.append((m.start(), m.start() + len(span), "When" if YEAR.match(span) else "How many"))
    for m in CAPITALIZED.finditer(sentence):
        if m.start() > 0 and len(m.group(0)) > 2:
            found.append((m.start(), m.end(), "What"))
    return found


def cloze(sentence: str, start: int, end: int, wh: str, clause_words: int) -> str:
    """The wh-word, then up to `clause_words` words on each side of the answer [start, end), answer removed."""
    left = sentence[:start].split()[-clause_words:]
    right = sentence[end:].rstrip(" .!?;:").split()[:clause_words]
    return " ".join([wh, *left, *right]) + "?"


def cloze_questions(passages: list[Passage], min_words: int = 8, clause_words: int = 10, seed: int = 0) -> list[dict]:
    """One cloze question per sentence of at least `min_words` words that has a candidate: `{"id",
    "question", "answers", "gold"}` (gold: the id of the passage it was cut from)."""
    rng = random.Random(seed)
    out = []
    for passage in passages:
        text = passage.text
        bounds = [0, *sentence_starts(text), len(text)]
        for n, (s, e) in enumerate(zip(bounds, bounds[1:])):
            sentence = text[s:e].strip()
            found = candidates(sentence)
            if len(sentence.split()) < min_words or not found:
                continue
            start, end, wh = rng.choice(found)
            question = cloze(sentence, start, end, wh, clause_words)
            qid = f"cloze-{passage.id}-{n}"
            out.append({"id": qid, "question": question, "answers": [sentence[start:end]], "gold": {passage.id}})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", default="data/squad", help="`rerag make-squad` output (corpus.jsonl, train.jsonl)")
    parser.add_argument("--out", default="data/squad_cloze")
    parser.add_argument("--min-words", type=int, default=8)
    parser.add_argument("--clause-words", type=int, default=10)
    parser.add_argument("--contexts", type=int, default=TRAIN_CONTEXTS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    squad, out = Path(args.squad), Path(args.out)
    corpus = load_corpus(squad / "corpus.jsonl")
    train = list(read_fid(squad / "train.jsonl"))  # checked: a bad record names its file, line and field
    # the training articles: those of make-squad's training questions' gold passages
    titles = {c["title"] for r in train for c in r["ctxs"] if c.get("gold")}
    questions = cloze_questions([p for p in corpus if p.title in titles], args.min_words, args.clause_words, args.seed)
    retriever = BM25Retriever(corpus, k=args.contexts)
    hits = retriever.retrieve([q["question"] for q in questions])
    records = [fid_record(q, h[: args.contexts]) for q, h in zip(questions, hits)]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "train.jsonl", "w", encoding="utf-8") as f:
        for record in train + records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    top1 = sum(r["ctxs"][0]["gold"] for r in records) / len(records)
    print(
        f"{len(records)} cloze questions from {len(titles)} articles ({', '.join(sorted(titles))}); "
        f"BM25 gold Recall@1 {top1:.3f}; with make-squad's {len(train)}: {out / 'train.jsonl'}"
    )
    for r in random.Random(args.seed).sample(records, min(5, len(records))):
        print(f"  {r['question']}  ->  {r['answers'][0]}")


if __name__ == "__main__":
    main()
