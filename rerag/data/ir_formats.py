"""The IR formats other tools speak, in and out of rerag's FiD records.

- TREC run: `qid Q0 docid rank score tag`, one line per retrieved document (what pyserini, trec_eval,
  ir-measures and ranx read and write). rerag orders a query's documents by score, best first (ties:
  the file's order), as those tools do by score.
- TREC qrels: `qid 0 docid relevance` (integer). A BEIR qrels file (`qrels/<split>.tsv`) is the same
  with tabs, three columns and a `query-id corpus-id score` header.
- BEIR folder: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`; answers, when
  the data has them, in `metadata.answers`), `qrels/<split>.tsv`.

`beir_to_fid` turns a BEIR folder and any retriever's run into FiD records: each query's top k by the
run, ids kept; `has_answer` by answer matching where the query has answers, else from the qrels
(relevance > 0), and `gold` from the qrels. The corpus is read line by line and only the documents
the run names are kept, so memory grows with the run, not with the corpus. `write_trec_run` writes a ranking back out with strictly
decreasing scores per query, so tools that break ties by document id read rerag's order.
Bad input raises `FiDFormatError` naming the file, the line and the field; nothing is dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from erag.answers import has_answer
from rerag.data.fid_format import FiDFormatError

Ranking = dict[str, list[tuple[str, float]]]  # query id -> (document id, score), best first


def _lines(path: Path) -> Iterable[tuple[int, list[str]]]:
    if not path.is_file():
        raise FiDFormatError(path, None, None, "file not found")
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, line.split()


def _run_entries(path: Path) -> Iterable[tuple[int, str, str, float]]:
    """(line number, qid, docid, score) of each line of a TREC run, checked."""
    seen = set()
    for number, fields in _lines(path):
        if len(fields) != 6:
            raise FiDFormatError(
                path, number, None, f"a run line has 6 fields (qid Q0 docid rank score tag), got {len(fields)}"
            )
        qid, _, docid, rank, score, _ = fields
        try:
            int(rank)
            value = float(score)
        except ValueError:
            raise FiDFormatError(path, number, "rank/score", f"not numbers: {rank!r}, {score!r}") from None
        if not math.isfinite(value):
            raise FiDFormatError(path, number, "score", f"not a finite number: {score!r}")
        if (qid, docid) in seen:
            raise FiDFormatError(path, number, "docid", f"{docid!r} is listed twice for query {qid!r}")
        seen.add((qid, docid))
        yield number, qid, docid, value


def _ranking(entries: Iterable[tuple[int, str, str, float]]) -> Ranking:
    ranking = {}
    for _, qid, docid, score in entries:
        ranking.setdefault(qid, []).append((docid, score))
    return {qid: sorted(docs, key=lambda d: -d[1]) for qid, docs in ranking.items()}


def read_trec_run(path: str | Path) -> Ranking:
    """A TREC run: each query's documents best first by score (the file's order among ties)."""
    return _ranking(_run_entries(Path(path)))


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels (`qid 0 docid rel`) or a BEIR qrels TSV (`query-id corpus-id score`, with that header)."""
    path, qrels = Path(path), {}
    for number, fields in _lines(path):
        if number == 1 and fields[:2] == ["query-id", "corpus-id"]:
            continue
        if len(fields) not in (3, 4):
            raise FiDFormatError(
                path, number, None, f"a qrels line has 4 fields (qid 0 docid rel) or 3 (BEIR), got {len(fields)}"
            )
        qid, docid, rel = fields[0], fields[-2], fields[-1]
        try:
            qrels.setdefault(qid, {})[docid] = int(rel)
        except ValueError:
            raise FiDFormatError(path, number, "relevance", f"not an integer: {rel!r}") from None
    return qrels


def _jsonl(path: Path, fields: tuple[str, ...], keep: set[str] | None = None) -> dict[str, dict]:
    """The rows of a JSONL file by `_id`, each line validated as it is read; with `keep`, only the
    rows whose `_id` it holds, so that a corpus of millions of documents is read line by line and
    only the documents a run names stay in memory."""
    rows = {}
    if not path.is_file():
        raise FiDFormatError(path, None, None, "file not found")
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise FiDFormatError(path, number, None, f"not valid JSON ({err.msg})") from None
            for field in fields:
                if not isinstance(row.get(field), str):
                    raise FiDFormatError(path, number, field, "missing or not a string")
            if keep is None or row["_id"] in keep:
                rows[row["_id"]] = row
    return rows


def beir_to_fid(beir_dir: str | Path, run_file: str | Path, split: str = "test", k: int = 100) -> list[dict]:
    """FiD records of the BEIR folder's queries, each with its top `k` documents of the run (see the
    module's docstring). Every query of the split's qrels must have run lines, and every run line a
    query and a document the folder holds."""
    beir, run_file = Path(beir_dir), Path(run_file)
    entries = list(_run_entries(run_file))
    run = _ranking(entries)
    # The corpus is streamed, keeping only the run's documents: memory grows with the run, not the corpus.
    corpus = _jsonl(beir / "corpus.jsonl", ("_id", "text"), keep={docid for _, _, docid, _ in entries})
    queries = _jsonl(beir / "queries.jsonl", ("_id", "text"))
    qrels_file = beir / "qrels" / f"{split}.tsv"
    qrels = read_qrels(qrels_file)
    numbers = {(qid, docid): number for number, qid, docid, _ in entries}  # for errors
    for qid, docs in run.items():
        if qid not in queries:
            raise FiDFormatError(
                run_file, numbers[qid, docs[0][0]], "qid", f"{qid!r} is not in {beir / 'queries.jsonl'}"
            )
        for docid, _ in docs:
            if docid not in corpus:
                raise FiDFormatError(
                    run_file, numbers[qid, docid], "docid", f"{docid!r} is not in {beir / 'corpus.jsonl'}"
                )
    if missing := [qid for qid in qrels if qid not in run]:
        raise FiDFormatError(
            qrels_file, None, "query-id", f"{len(missing)} queries have no line in {run_file}: {missing[:5]}"
        )
    records = []
    for qid in qrels:
        answers = list((queries[qid].get("metadata") or {}).get("answers") or [])
        judged = qrels[qid]
        ctxs = [
            {
                "id": docid,
                "title": corpus[docid].get("title") or "",
                "text": corpus[docid]["text"],
                "score": score,
                "has_answer": has_answer(corpus[docid]["text"], answers) if answers else judged.get(docid, 0) > 0,
                "gold": judged.get(docid, 0) > 0,
            }
            for docid, score in run[qid][:k]
        ]
        records.append({"id": qid, "question": queries[qid]["text"], "answers": answers, "ctxs": ctxs})
    return records


def strictly_decreasing(scores: list[float]) -> list[float]:
    """`scores` (best first) with each tie nudged below the one before by the least float step, so
    tools that break ties by document id keep this order."""
    out = []
    for score in scores:
        out.append(score if not out or score < out[-1] else math.nextafter(out[-1], -math.inf))
    return out


def write_trec_run(path: str | Path, ranking: Ranking, tag: str = "rerag") -> Path:
    """A TREC run of `ranking` (each query's documents best first)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in ranking.items():
            scores = strictly_decreasing([score for _, score in docs])
            for rank, ((docid, _), score) in enumerate(zip(docs, scores), 1):
                f.write(f"{qid} Q0 {docid} {rank} {score!r} {tag}\n")
    return path


def write_qrels(path: str | Path, qrels: Mapping[str, Mapping[str, int]]) -> Path:
    """TREC qrels (`qid 0 docid rel`, integer relevance)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in qrels.items():
            for docid, rel in docs.items():
                f.write(f"{qid} 0 {docid} {int(rel)}\n")
    return path
