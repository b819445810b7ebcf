"""A second SQuAD builder, written apart from `rerag make-squad`, for checks on passages it did not cut.

`rerag make-squad` cuts each paragraph into passages of whole sentences of at most 100 words and
never crosses a paragraph. This builder runs each article's paragraphs together and cuts the
stream into sentence-aligned passages of 60 to 120 words (a passage closes at the first sentence
end past 60 words; a sentence that would carry it past 120 starts the next one), across paragraph
boundaries, with its own sentence splitter. BM25 (bm25s, "title text", no stemming) over the
passages of every article gives each answerable question of the chosen articles its top
`--contexts`, in the FiD format: `has_answer` (DPR match of any answer, `erag.answers.has_answer`)
and `gold` (the passage holding the first answer's start offset). So a config tuned to
make-squad's passages (their lengths, their boundaries) meets others here.

    python benchmarks/sentence_passages.py --input SQUAD.json --articles "Computational complexity theory" \\
        --out data/squad_sentences
    rerag test --config configs/squad_smollm2_teacher.yaml --ckpt_path CKPT \\
        --data.init_args.test_file data/squad_sentences/test.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import bm25s

from erag.answers import has_answer

SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def sentences(text: str, offset: int) -> list[tuple[int, int]]:
    """(start, end) character spans of `text`'s sentences, shifted by `offset`."""
    spans, start = [], 0
    for match in SENTENCE_END.finditer(text):
        spans.append((offset + start, offset + match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((offset + start, offset + len(text)))
    return spans


def passages(article: dict, min_words: int = 60, max_words: int = 120) -> tuple[str, list[tuple[int, int]], list[int]]:
    """The article's paragraphs joined by newlines, its passages' (start, end) spans in that text,
    and each paragraph's start offset."""
    starts, text = [], ""
    for paragraph in article["paragraphs"]:
        starts.append(len(text))
        text += paragraph["context"] + "\n"
    spans = [s for p, start in zip(article["paragraphs"], starts) for s in sentences(p["context"], start)]
    out, start, end, words = [], None, 0, 0  # the open passage: its first sentence's start, last end, words
    for s, e in spans:
        n = len(text[s:e].split())
        if start is not None and words + n > max_words:
            out.append((start, end))
            start, words = None, 0
        start, end, words = s if start is None else start, e, words + n
        if words >= min_words:
            out.append((start, end))
            start, words = None, 0
    if start is not None:
        out.append((start, end))
    return text, out, starts


def build(squad: dict, articles: list[str], k: int) -> tuple[list[dict], list[dict]]:
    """The corpus of every article and the FiD records of the answerable questions of `articles`.

    A title may be spelled as the data file spells it (`Sky_(United_Kingdom)`) or with spaces."""
    articles = [a.replace("_", " ") for a in articles]
    corpus, questions = [], []
    for a, article in enumerate(squad["data"]):
        title = article["title"].replace("_", " ")
        text, spans, starts = passages(article)
        first = len(corpus)
        corpus += [
            {"id": f"s{a}.{i}", "title": title, "text": text[s:e].replace("\n", " ").strip()}
            for i, (s, e) in enumerate(spans)
        ]
        if title not in articles:
            continue
        for p, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    continue
                at = starts[p] + qa["answers"][0]["answer_start"]
                gold = next(first + i for i, (s, e) in enumerate(spans) if s <= at < e)
                answers = list(dict.fromkeys(x["text"] for x in qa["answers"]))
                questions.append({"id": qa["id"], "question": qa["question"], "answers": answers, "gold": gold})
    missing = set(articles) - {c["title"] for c in corpus}
    if missing:
        raise SystemExit(f"no article titled {sorted(missing)} in the input")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{c['title']} {c['text']}" for c in corpus], stopwords="en", show_progress=False))
    hits, scores = retriever.retrieve(
        bm25s.tokenize([q["question"] for q in questions], stopwords="en", show_progress=False),
        k=min(k, len(corpus)),
        show_progress=False,
    )
    records = []
    for q, row, row_scores in zip(questions, hits, scores):
        ctxs = [
            corpus[int(i)]
            | {
                "score": round(float(s), 4),
                "has_answer": has_answer(corpus[int(i)]["text"], q["answers"]),
                "gold": int(i) == q["gold"],
            }
            for i, s in zip(row, row_scores)
        ]
        records.append({"id": q["id"], "question": q["question"], "answers": q["answers"], "ctxs": ctxs})
    return corpus, records


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--input", type=Path, required=True, help="a SQuAD-format JSON")
    p.add_argument("--articles", nargs="+", required=True, help="titles of the articles whose questions are written")
    p.add_argument("--out", type=Path, required=True, help="folder for corpus.jsonl and test.jsonl")
    p.add_argument("--contexts", type=int, default=100, help="BM25 contexts per question")
    args = p.parse_args()
    corpus, records = build(json.loads(args.input.read_text()), args.articles, args.contexts)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus", corpus), ("test", records)):
        with open(args.out / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    words = [len(c["text"].split()) for c in corpus]
    top1 = sum(r["ctxs"][0]["gold"] for r in records) / len(records)
    longest = sum(
        max(r["ctxs"][:4], key=lambda c: len(c["text"].split()))["gold"] and any(c["gold"] for c in r["ctxs"][:4])
        for r in records
    )
    print(
        f"{len(corpus)} passages ({min(words)}-{max(words)} words, mean {sum(words) / len(words):.0f}); "
        f"{len(records)} questions; BM25 gold Recall@1 {top1:.3f}; gold the longest of BM25's top 4 for "
        f"{longest} ({100 * longest / len(records):.1f}%); {args.out}/test.jsonl"
    )


if __name__ == "__main__":
    main()
