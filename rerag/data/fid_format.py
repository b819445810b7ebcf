"""The one data format: FiD / FiD-KD records, validated field by field.

A record is `{"id", "question", "answers": [str, ...], "ctxs": [{"id", "title", "text",
"score", "has_answer"?, "gold"?}, ...]}` (`gold`: the passage holds the question's own answer span, as
the SQuAD builder marks it; kept when present, other unknown keys are dropped). A question known
to have no answer (SQuAD 2.0's) has `answers: []` and `"unanswerable": true`, and is read even
where answers are required. Files are UTF-8: a JSON list of records or JSONL, one per line, plain or
gzipped (`.gz`), decoded as a stream (memory holds a piece of the file and a record, not the file).
Every problem is reported as `FiDFormatError` naming the file, the place (`line L` in JSONL;
`record N, line L` in a JSON list, N counted from 1 and L the line where the record starts, or
where the bad byte or broken JSON is) and the field. See `read_fid` for ids, duplicates, empty
files and what `skip_invalid` skips.
"""

from __future__ import annotations

import codecs
import gzip
import json
import logging
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from erag.answers import has_answer

log = logging.getLogger(__name__)

# Bump when validation gets stricter, so caches of files validated by older rules are rebuilt.
VALIDATION_VERSION = 5


class FiDFormatError(ValueError):
    """A FiD-format file is malformed; the message names the file, the line (JSONL) or the
    record and its line (JSON list), and the field."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, problem: str, record: int | None = None):
        where = (
            f"{path}"
            + (f", record {record}" if record is not None else "")
            + (f", line {line}" if line is not None else "")
        )
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{problem}")
        self.path, self.line, self.record, self.field = str(path), line, record, field


class Place(NamedTuple):
    """Where a record is: its 1-based position among the file's records, the line it starts
    on, and whether the file is a JSON list (reported as `record N, line L`) or JSONL (`line L`)."""

    number: int
    line: int
    in_list: bool = False

    @property
    def record(self) -> int | None:
        return self.number if self.in_list else None

    def __str__(self) -> str:
        return f"record {self.number}, line {self.line}" if self.in_list else f"line {self.line}"


def decode_utf8(path: Path, data: bytes) -> str:
    """The file's text; a byte that is not UTF-8 raises, naming its line and, when the file
    parses around it, the record and the field that hold it."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        start = err.start
    problem = f"not valid UTF-8 (byte 0x{data[start]:02x} at offset {start}); save the file as UTF-8"
    line = data.count(b"\n", 0, start) + 1
    # Undecodable bytes become lone surrogates \udc80-\udcff, so the first string holding one
    # names the record and the field. Only failing files pay for this second pass.
    field = record = None
    try:
        for place, value in _parse(path, [data.decode("utf-8", errors="surrogateescape")]):
            if place.in_list or place.line == line:
                field = _field_holding_surrogate(value)
                if field is not None:
                    record = place.record
                    break
    except FiDFormatError:
        pass  # the bad byte breaks the JSON around it: its line is all we can name
    raise FiDFormatError(path, line, field or None, problem, record=record)


def _field_holding_surrogate(value: Any, field: str = "") -> str | None:
    """The field path (`ctxs[1].text`) of the first string in `value` with an undecodable byte."""
    if isinstance(value, str):
        return field if any("\udc80" <= ch <= "\udcff" for ch in value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{field}.{key}" if field else key
            if _field_holding_surrogate(key) is not None:
                return path
            found = _field_holding_surrogate(item, path)
            if found is not None:
                return found
    if isinstance(value, list):
        for j, item in enumerate(value):
            found = _field_holding_surrogate(item, f"{field}[{j}]")
            if found is not None:
                return found
    return None


#: Bytes read at a time: a file is decoded as a stream, never held whole.
CHUNK_BYTES = 1 << 20
#: The most text one record may span: a JSON list whose next value does not decode within it is an error.
MAX_RECORD_CHARS = 64 << 20


def _text_chunks(path: Path) -> Iterator[str]:
    """The file's text in pieces (`.gz` decompressed), decoded as UTF-8 as it is read; a byte that is
    not UTF-8 raises `decode_utf8`'s error, which reads the failing file whole to name the place."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
        try:
            while data := f.read(CHUNK_BYTES):
                yield decoder.decode(data)
            yield decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            f.seek(0)
            decode_utf8(path, f.read())  # raises, naming the line, record and field
            raise


def _parse(path: Path, chunks: Iterable[str]) -> Iterator[tuple[Place, Any]]:
    """(`Place`, value) of each record of a JSON list or JSONL text given in pieces, read as a
    stream: memory holds the pieces not yet parsed, not the file. `pos` is where parsing stands in
    `buf`; `mark` <= `pos` is the first character still needed, on line `line`."""
    chunks = iter(chunks)
    buf, pos, mark, line, eof = "", 0, 0, 1, False

    def more() -> bool:
        """Append the next piece, dropping what is before `mark`; False at the end of the text."""
        nonlocal buf, pos, mark, eof
        piece = next(chunks, None)
        if piece is None:
            eof = True
            return False
        buf, pos, mark = buf[mark:] + piece, pos - mark, 0
        return True

    def advance(to: int) -> None:
        """Move `mark` (and `pos`) to `to`, counting the lines passed."""
        nonlocal pos, mark, line
        line += buf.count("\n", mark, to)
        pos = mark = to

    while not buf.strip() and more():
        pass
    if not buf.lstrip().startswith("["):  # JSONL: one record per line
        number = 0
        while pos < len(buf) or more():
            end = buf.find("\n", pos)
            while end < 0 and more():
                end = buf.find("\n", pos)
            end = len(buf) if end < 0 else end
            text, lineno = buf[pos:end], line
            advance(min(end + 1, len(buf)))
            if not text.strip():
                continue
            number += 1
            try:
                yield Place(number, lineno), json.loads(text)
            except json.JSONDecodeError as err:
                raise FiDFormatError(path, lineno, None, f"not valid JSON ({err.msg})") from None
        return
    # A JSON list: decode element by element so each record keeps its number and line.
    decoder = json.JSONDecoder()
    advance(len(buf) - len(buf.lstrip()) + 1)
    number = 0
    while True:
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos < len(buf) or not more():
                break
        if pos >= len(buf):
            raise FiDFormatError(path, line + buf.count("\n", mark), None, "JSON list is not closed")
        if buf[pos] == "]":
            return
        advance(pos)
        number += 1
        while True:  # a record cut at the end of the pieces read so far is read on with the next
            try:
                value, end = decoder.raw_decode(buf, pos)
                if end < len(buf) or eof or not more():
                    break
            except json.JSONDecodeError as err:
                if eof or len(buf) - mark > MAX_RECORD_CHARS or not more():
                    at = line + buf.count("\n", mark, err.pos)
                    raise FiDFormatError(path, at, None, f"not valid JSON ({err.msg})", record=number) from None
        yield Place(number, line, in_list=True), value
        pos = end


def iter_raw_records(path: str | Path) -> Iterator[tuple[Place, Any]]:
    """Yield (`Place`, parsed JSON value) for each record of a JSON list or JSONL file (`.gz` too),
    read as a stream."""
    path = Path(path)
    if not path.is_file():
        raise FiDFormatError(path, None, None, "file not found")
    yield from _parse(path, _text_chunks(path))


def _require(cond: bool, path, where: Place, field, problem) -> None:
    if not cond:
        raise FiDFormatError(path, where.line, field, problem, record=where.record)


def validate_record(raw: Any, path: str | Path, where: Place | int, require_answers: bool = True) -> dict:
    """Check one raw record and return it in canonical form (string ids, finite float scores,
    `has_answer` on every context, computed DPR-style when the file lacks it; `gold` kept where given).

    `where` is the record's `Place` (a bare int is read as a JSONL line that is also the record's
    number). A record without an `id` gets its 1-based position in the file, `str(where.number)`:
    "1", "2", ... in file order, blank lines not counted; for a JSONL file without blank lines
    that is its line number. (FiD's own loader numbers from 0.)"""
    if not isinstance(where, Place):
        where = Place(where, where)
    _require(isinstance(raw, dict), path, where, None, "record is not a JSON object")
    for key in ("question", "ctxs") + (("answers",) if require_answers else ()):
        _require(key in raw, path, where, key, "missing")
    qid = raw.get("id", str(where.number))
    _require(isinstance(qid, (str, int)), path, where, "id", "must be a string or an integer")
    question = raw["question"]
    _require(
        isinstance(question, str) and question.strip() != "", path, where, "question", "must be a non-empty string"
    )
    answers = raw.get("answers", [])
    _require(
        isinstance(answers, list) and all(isinstance(a, str) for a in answers),
        path,
        where,
        "answers",
        "must be a list of strings",
    )
    unanswerable = raw.get("unanswerable", False)
    _require(
        isinstance(unanswerable, bool) and not (unanswerable and answers),
        path,
        where,
        "unanswerable",
        "must be true (with answers: []) or false",
    )
    _require(
        not require_answers or len(answers) > 0 or unanswerable,
        path,
        where,
        "answers",
        'is empty (a question known to have no answer says "unanswerable": true)',
    )
    ctxs = raw["ctxs"]
    _require(isinstance(ctxs, list), path, where, "ctxs", "must be a list")
    _require(len(ctxs) > 0, path, where, "ctxs", "is empty")
    out_ctxs = []
    for j, ctx in enumerate(ctxs):
        f = f"ctxs[{j}]"
        _require(isinstance(ctx, dict), path, where, f, "must be an object")
        _require("text" in ctx, path, where, f"{f}.text", "missing")
        for key in ("title", "text"):
            _require(isinstance(ctx.get(key, ""), str), path, where, f"{f}.{key}", "must be a string")
        cid = ctx.get("id", f"{qid}:{j}")
        _require(isinstance(cid, (str, int)), path, where, f"{f}.id", "must be a string or an integer")
        score = ctx.get("score", 0.0)
        try:
            score = float(score)  # FiD-KD writes scores as strings
        except (TypeError, ValueError):
            raise FiDFormatError(
                path, where.line, f"{f}.score", f"not a number: {score!r}", record=where.record
            ) from None
        _require(math.isfinite(score), path, where, f"{f}.score", f"must be a finite number, not {score!r}")
        hit = ctx.get("has_answer")
        _require(hit is None or isinstance(hit, bool), path, where, f"{f}.has_answer", "must be a boolean")
        gold = ctx.get("gold")
        _require(gold is None or isinstance(gold, bool), path, where, f"{f}.gold", "must be a boolean")
        title, text = ctx.get("title", ""), ctx["text"]
        if hit is None:
            hit = has_answer(text, answers) if answers else False  # DPR: the passage text, never the title
        out = {"id": str(cid), "title": title, "text": text, "score": score, "has_answer": hit}
        out_ctxs.append(out if gold is None else {**out, "gold": gold})
    record = {"id": str(qid), "question": question, "answers": answers, "ctxs": out_ctxs}
    return record | {"unanswerable": True} if unanswerable else record


def read_fid(path: str | Path, require_answers: bool = True, skip_invalid: bool = False) -> Iterator[dict]:
    """Yield validated records of a FiD-format file; the first problem raises `FiDFormatError`.

    Ids: a record without `id` gets its 1-based position in the file ("1", "2", ...; see
    `validate_record`). Ids must be unique, because results are keyed by them: a repeated id
    (given or defaulted, compared as strings, so 7 and "7" collide) is an error naming both places.

    With `skip_invalid`, records that are malformed by themselves are skipped and their count is
    logged as a warning. File-level problems still raise: a file that is missing, not UTF-8, not
    JSON, or holds no (valid) record, and a repeated id among the records kept, since which
    of the two is wrong cannot be known and keeping either silently changes the set.
    """
    skipped = kept = 0
    seen: dict[str, Place] = {}
    for where, raw in iter_raw_records(path):
        try:
            record = validate_record(raw, path, where, require_answers)
        except FiDFormatError as err:
            if not skip_invalid:
                raise
            skipped += 1
            log.warning("skipping %s", err)
            continue
        if record["id"] in seen:
            given = "" if "id" in raw else " (the record has no id; it defaults to its position)"
            raise FiDFormatError(
                path,
                where.line,
                "id",
                f"duplicate id {record['id']!r}{given}; {seen[record['id']]} already has it",
                record=where.record,
            )
        seen[record["id"]] = where
        kept += 1
        yield record
    if skipped:
        log.warning("%s: skipped %d invalid record(s)", path, skipped)
    if not kept:
        raise FiDFormatError(
            path,
            None,
            None,
            f"no valid record (all {skipped} skipped)"
            if skipped
            else "no records (an empty file or an empty JSON list)",
        )
