"""Real text in, FiD out: a SQuAD-format JSON (v1.1 or v2.0) becomes FiD train/dev/test files and a corpus.

- Corpus: every paragraph of every article, cut into passages of whole sentences (a regex splitter) of at
  most about `max_words` words. Sentences that an answer span crosses stay in one passage, so a span is
  never cut; a single sentence longer than `max_words` stays whole. One corpus serves every split, so
  retrieval over it is open-domain: the question's own paragraph competes with all the others.
- Splits by article (no article in two splits), drawn with a seed, or named (`test_articles`,
  `dev_articles`: a leave-one-article-out fold). With named articles the training questions' contexts
  are retrieved from the training articles' passages alone, so no dev or test passage is a training
  context; dev and test questions retrieve from every passage. (The seeded split keeps one corpus for
  every split, as the shipped split's files were built.)
- Contexts come from eor's retrievers (BM25 by default, or dense with an encoder folder), with the
  retriever's score. Each context has `has_answer` (DPR matching on the passage text, never the title)
  and `gold`: the passage holds one of the question's own answer spans (by character offsets in its
  paragraph), the label a string match cannot give.
- SQuAD 2.0's unanswerable questions (`is_impossible`, or no answers) go to `{split}_unanswerable.jsonl`
  with `answers: []` and `"unanswerable": true` (`read_fid` reads them where answers are required).

Bad input raises `FiDFormatError` naming the file and the field (`data[0].paragraphs[2].qas[1].answers[0]`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from eor.corpus import Passage
from eor.encoder import Encoder
from eor.retrievers import BM25Retriever, DenseRetriever
from erag.answers import has_answer
from erag.lm import resolve
from rerag.data.fid_format import FiDFormatError, decode_utf8
from rerag.defaults import DENSE_ENCODER, EVAL_CONTEXTS, TRAIN_CONTEXTS

SPLITS = ("train", "dev", "test")

# A sentence ends at . ! or ? (maybe followed by a closing quote or bracket), then white space, then what
# looks like a sentence start. Not inside dotted capitals ("U.S. Army") or after Mr, Dr, St.
_SENTENCE_END = re.compile(r"(?<!\.[A-Z])(?<!\b(?:Mr|Dr|St))[.!?][\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Þ])")


def sentence_starts(text: str) -> list[int]:
    """Character offsets where the second, third, ... sentence of `text` starts."""
    return [m.end() for m in _SENTENCE_END.finditer(text)]


def passage_spans(context: str, answer_spans: Sequence[tuple[int, int]], max_words: int = 100) -> list[tuple[int, int]]:
    """Cut `context` into consecutive (start, end) character spans of whole sentences, packed greedily up
    to `max_words` words each. A sentence boundary inside an answer span [start, end) is not a cut."""
    cuts = [b for b in sentence_starts(context) if not any(s < b < e for s, e in answer_spans)]
    units = list(zip([0] + cuts, cuts + [len(context)]))
    spans: list[tuple[int, int]] = []
    words = 0
    for start, end in units:
        n = len(context[start:end].split())
        if spans and words + n <= max_words:
            spans[-1] = (spans[-1][0], end)
            words += n
        else:
            spans.append((start, end))
            words = n
    return spans


def _check(ok: bool, path: Path, field: str, problem: str) -> None:
    if not ok:
        raise FiDFormatError(path, None, field, problem)


def load_squad(path: str | Path) -> list[dict]:
    """The articles of a SQuAD file, each `{"title", "paragraphs": [{"context", "questions"}]}`, a question
    being `{"id", "question", "answers": [str], "spans": [(start, end)]}` (no answers: unanswerable).
    Checks every field SQuAD defines and that each answer's text is at its `answer_start`."""
    path = Path(path)
    if not path.is_file():
        raise FiDFormatError(path, None, None, "file not found")
    text = decode_utf8(path, path.read_bytes())
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise FiDFormatError(path, err.lineno, None, f"not valid JSON ({err.msg})") from None
    _check(
        isinstance(raw, dict) and isinstance(raw.get("data"), list),
        path,
        "data",
        'missing or not a list (a SQuAD file is {"version", "data": [articles]})',
    )
    articles, seen = [], set()
    for a, article in enumerate(raw["data"]):
        where = f"data[{a}]"
        _check(isinstance(article, dict), path, where, "must be an object")
        _check(isinstance(article.get("title"), str), path, f"{where}.title", "missing or not a string")
        _check(isinstance(article.get("paragraphs"), list), path, f"{where}.paragraphs", "missing or not a list")
        paragraphs = []
        for p, paragraph in enumerate(article["paragraphs"]):
            where = f"data[{a}].paragraphs[{p}]"
            _check(isinstance(paragraph, dict), path, where, "must be an object")
            context = paragraph.get("context")
            _check(
                isinstance(context, str) and context.strip() != "",
                path,
                f"{where}.context",
                "missing or not a non-empty string",
            )
            _check(isinstance(paragraph.get("qas"), list), path, f"{where}.qas", "missing or not a list")
            questions = []
            for q, qa in enumerate(paragraph["qas"]):
                questions.append(_question(qa, context, path, f"{where}.qas[{q}]", seen))
            paragraphs.append({"context": context, "questions": questions})
        articles.append({"title": article["title"].replace("_", " "), "paragraphs": paragraphs})
    _check(len(articles) > 0, path, "data", "holds no article")
    return articles


def _question(qa, context: str, path: Path, where: str, seen: set) -> dict:
    _check(isinstance(qa, dict), path, where, "must be an object")
    _check(
        isinstance(qa.get("id"), str) and qa["id"] not in seen,
        path,
        f"{where}.id",
        f"missing, not a string or repeated ({qa.get('id')!r})",
    )
    seen.add(qa["id"])
    _check(
        isinstance(qa.get("question"), str) and qa["question"].strip() != "",
        path,
        f"{where}.question",
        "missing or not a non-empty string",
    )
    impossible = qa.get("is_impossible", False)
    _check(isinstance(impossible, bool), path, f"{where}.is_impossible", "must be a boolean")
    _check("answers" in qa or impossible, path, f"{where}.answers", "missing")
    answers = qa.get("answers", [])
    _check(isinstance(answers, list), path, f"{where}.answers", "must be a list")
    texts, spans = [], []
    for i, answer in enumerate(answers if not impossible else []):
        field = f"{where}.answers[{i}]"
        _check(
            isinstance(answer, dict)
            and isinstance(answer.get("text"), str)
            and answer["text"].strip() != ""
            and isinstance(answer.get("answer_start"), int),
            path,
            field,
            'must be {"text": non-empty string, "answer_start": integer}',
        )
        start, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
        _check(
            0 <= start and context[start:end] == answer["text"],
            path,
            f"{field}.answer_start",
            f"text {answer['text']!r} is not at offset {start} of its context (found {context[start:end]!r})",
        )
        spans.append((start, end))
        if answer["text"] not in texts:
            texts.append(answer["text"])
    return {"id": qa["id"], "question": qa["question"], "answers": texts, "spans": spans}


def split_articles(n: int, fractions: Sequence[float], seed: int) -> list[str]:
    """The split of each of `n` articles: dev and test get round(fraction * n) articles (at least one
    each), train the rest; which articles is a shuffle by `seed`."""
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions must be three positive numbers (train, dev, test) summing to 1, got {fractions}")
    dev, test = (max(1, round(f * n)) for f in fractions[1:])
    if n - dev - test < 1:
        raise ValueError(f"{n} article(s) cannot make three splits by article: at least 3 are needed")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    names = ["train"] * n
    for i in order[:dev]:
        names[i] = "dev"
    for i in order[dev : dev + test]:
        names[i] = "test"
    return names


def name_articles(titles: Sequence[str], test_articles: Sequence[str], dev_articles: Sequence[str]) -> list[str]:
    """The split of each article of `titles`: test and dev as named (a title as the data file spells it,
    `Sky_(United_Kingdom)`, or with spaces), train the rest, which must hold at least one."""
    plain = lambda title: title.replace("_", " ")  # noqa: E731 (load_squad's titles have spaces)
    named = {}
    for split, chosen in (("test", test_articles), ("dev", dev_articles)):
        if not chosen:
            raise ValueError(f"{split}_articles: name at least one article")
        for title in chosen:
            if plain(title) not in map(plain, titles):
                raise ValueError(f"{split}_articles: no article {title!r}; the file holds {', '.join(titles)}")
            if named.setdefault(plain(title), split) != split:
                raise ValueError(f"{split}_articles: {title!r} is named for test and for dev")
    names = [named.get(plain(title), "train") for title in titles]
    if "train" not in names:
        raise ValueError("test_articles and dev_articles name every article: none is left to train on")
    return names


def make_squad(
    input: str | Path,
    out: str | Path,
    fractions: Sequence[float] | None = None,
    seed: int | None = None,
    retriever: Literal["bm25", "dense"] = "bm25",
    encoder: str = DENSE_ENCODER,
    train_k: int = TRAIN_CONTEXTS,
    eval_k: int = EVAL_CONTEXTS,
    max_words: int = 100,
    test_articles: Sequence[str] = (),
    dev_articles: Sequence[str] = (),
) -> dict[str, int]:
    """Write OUT/corpus.jsonl, OUT/{train,dev,test}.jsonl and, for unanswerable questions,
    OUT/{split}_unanswerable.jsonl. The split by article is drawn by `seed` in `fractions` (default
    0, (0.6, 0.2, 0.2)), or named by `test_articles` and `dev_articles` (exclusive with those two).
    Returns counts: `passages`, `{split}_articles` and, per file written (`train`,
    `train_unanswerable`, ...), its questions."""
    articles = load_squad(input)
    if test_articles or dev_articles:
        if fractions is not None or seed is not None:
            raise ValueError("test_articles / dev_articles name the split: leave fractions and seed unset")
        names = name_articles([a["title"] for a in articles], test_articles, dev_articles)
    else:
        names = split_articles(len(articles), fractions or (0.6, 0.2, 0.2), 0 if seed is None else seed)
    corpus: list[Passage] = []
    questions: dict[str, list[dict]] = {}
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article["paragraphs"]):
            context, qs = paragraph["context"], paragraph["questions"]
            spans = passage_spans(context, [span for q in qs for span in q["spans"]], max_words)
            ids = [f"{a}.{p}.{k}" for k in range(len(spans))]
            corpus += [Passage(i, article["title"], context[s:e].strip()) for i, (s, e) in zip(ids, spans)]
            for q in qs:
                gold = {i for i, (s, e) in zip(ids, spans) if any(s <= start < e for start, _ in q["spans"])}
                file = names[a] + ("" if q["answers"] else "_unanswerable")
                questions.setdefault(file, []).append({**q, "gold": gold})
    ranked = _retriever(corpus, retriever, encoder, max(train_k, eval_k))
    if test_articles:  # a fold: training contexts from the training articles' passages alone
        train_passages = [p for p in corpus if names[int(p.id.split(".")[0])] == "train"]
        ranked_train = _retriever(train_passages, retriever, encoder, train_k)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:  # a stale file from an earlier run would pass for this one's
        (out / f"{split}_unanswerable.jsonl").unlink(missing_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for passage in corpus:
            row = {"id": passage.id, "title": passage.title, "text": passage.text}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts = {"passages": len(corpus), **{f"{split}_articles": names.count(split) for split in SPLITS}}
    for file in sorted(questions):
        qs = questions[file]
        k = train_k if file.startswith("train") else eval_k
        retriever_of_file = ranked_train if test_articles and file.startswith("train") else ranked
        with open(out / f"{file}.jsonl", "w", encoding="utf-8") as f:
            for q, hits in zip(qs, retriever_of_file.retrieve([q["question"] for q in qs])):
                f.write(json.dumps(fid_record(q, hits[:k]), ensure_ascii=False) + "\n")
        counts[file] = len(qs)
    return counts


def _retriever(corpus: list[Passage], kind: str, encoder: str, k: int):
    """eor's BM25 or dense retriever over the corpus (the dense encoder folder may be `package:path`)."""
    if kind == "bm25":
        return BM25Retriever(corpus, k=k)
    if kind == "dense":
        return DenseRetriever(corpus, Encoder(resolve(encoder)), k=k)
    raise ValueError(f"retriever must be 'bm25' or 'dense', got {kind!r}")


def fid_record(question: dict, hits: list[Passage]) -> dict:
    """One FiD record; an unanswerable question has `answers: []` and `"unanswerable": true`."""
    ctxs = [
        {
            "id": h.id,
            "title": h.title,
            "text": h.text,
            "score": round(float(h.score), 4),
            "has_answer": has_answer(h.text, question["answers"]),
            "gold": h.id in question["gold"],
        }
        for h in hits
    ]
    record = {"id": question["id"], "question": question["question"], "answers": question["answers"], "ctxs": ctxs}
    return record if question["answers"] else {**record, "unanswerable": True}
