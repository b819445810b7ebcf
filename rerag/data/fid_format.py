"""The one data format: FiD / FiD-KD records, validated field by field.

A record is `{"id", "question", "answers": [str, ...], "ctxs": [{"id", "title", "text",
"score", "has_answer"?}, ...]}`. Files are a JSON list of records or JSONL, one per line.
Every problem is reported as `FiDFormatError` naming the file, the line and the field.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from erag.answers import has_answer

log = logging.getLogger(__name__)


class FiDFormatError(ValueError):
    """A record of a FiD-format file is malformed; the message names file, line and field."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, problem: str):
        where = f"{path}" + (f", line {line}" if line is not None else "")
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{problem}")
        self.path, self.line, self.field = str(path), line, field


def iter_raw_records(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number where the record starts, parsed JSON value) for JSON or JSONL."""
    path = Path(path)
    if not path.is_file():
        raise FiDFormatError(path, None, None, "file not found")
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if not stripped.startswith("["):
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as err:
                raise FiDFormatError(path, lineno, None, f"not valid JSON ({err.msg})") from None
        return
    # A JSON list: decode element by element so each record keeps its line number.
    decoder = json.JSONDecoder()
    pos = len(text) - len(stripped) + 1
    lineno = text.count("\n", 0, pos) + 1
    last = pos
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            raise FiDFormatError(path, text.count("\n") + 1, None, "JSON list is not closed")
        if text[pos] == "]":
            return
        lineno += text.count("\n", last, pos)
        last = pos
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise FiDFormatError(path, err.lineno, None, f"not valid JSON ({err.msg})") from None
        yield lineno, value


def _require(cond: bool, path, line, field, problem) -> None:
    if not cond:
        raise FiDFormatError(path, line, field, problem)


def validate_record(raw: Any, path: str | Path, line: int, require_answers: bool = True) -> dict:
    """Check one raw record and return it in canonical form (string ids, float scores,
    `has_answer` on every context, computed DPR-style when the file lacks it)."""
    _require(isinstance(raw, dict), path, line, None, "record is not a JSON object")
    for key in ("question", "ctxs") + (("answers",) if require_answers else ()):
        _require(key in raw, path, line, key, "missing")
    qid = raw.get("id", str(line))
    _require(isinstance(qid, (str, int)), path, line, "id", "must be a string or an integer")
    question = raw["question"]
    _require(isinstance(question, str) and question.strip() != "", path, line, "question",
             "must be a non-empty string")
    answers = raw.get("answers", [])
    _require(isinstance(answers, list) and all(isinstance(a, str) for a in answers), path, line,
             "answers", "must be a list of strings")
    _require(not require_answers or len(answers) > 0, path, line, "answers", "is empty")
    ctxs = raw["ctxs"]
    _require(isinstance(ctxs, list), path, line, "ctxs", "must be a list")
    _require(len(ctxs) > 0, path, line, "ctxs", "is empty")
    out_ctxs = []
    for j, ctx in enumerate(ctxs):
        f = f"ctxs[{j}]"
        _require(isinstance(ctx, dict), path, line, f, "must be an object")
        _require("text" in ctx, path, line, f"{f}.text", "missing")
        for key in ("title", "text"):
            _require(isinstance(ctx.get(key, ""), str), path, line, f"{f}.{key}", "must be a string")
        cid = ctx.get("id", f"{qid}:{j}")
        _require(isinstance(cid, (str, int)), path, line, f"{f}.id", "must be a string or an integer")
        score = ctx.get("score", 0.0)
        try:
            score = float(score)  # FiD-KD writes scores as strings
        except (TypeError, ValueError):
            raise FiDFormatError(path, line, f"{f}.score", f"not a number: {score!r}") from None
        hit = ctx.get("has_answer")
        _require(hit is None or isinstance(hit, bool), path, line, f"{f}.has_answer", "must be a boolean")
        title, text = ctx.get("title", ""), ctx["text"]
        if hit is None:
            hit = has_answer(text, answers) if answers else False  # DPR: the passage text, never the title
        out_ctxs.append({"id": str(cid), "title": title, "text": text, "score": score, "has_answer": hit})
    return {"id": str(qid), "question": question, "answers": answers, "ctxs": out_ctxs}


def read_fid(path: str | Path, require_answers: bool = True, skip_invalid: bool = False) -> Iterator[dict]:
    """Yield validated records of a FiD-format file. With `skip_invalid`, malformed records
    are skipped and their count is logged as a warning; otherwise the first one raises."""
    skipped = 0
    for line, raw in iter_raw_records(path):
        try:
            yield validate_record(raw, path, line, require_answers)
        except FiDFormatError as err:
            if not skip_invalid:
                raise
            skipped += 1
            log.warning("skipping %s", err)
    if skipped:
        log.warning("%s: skipped %d invalid record(s)", path, skipped)
