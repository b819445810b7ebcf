"""Passages and the JSONL passage corpus (`{"id", "title", "text"}` per line)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


class CorpusError(ValueError):
    """A corpus line that is not a valid passage; the message names file, line and field."""


@dataclass(frozen=True)
class Passage:
    """One retrieved text chunk; `score` is the retriever's score (higher ranks first)."""

    id: str
    title: str
    text: str
    score: float = 0.0

    def to_text(self) -> str:
        """The string a reader sees: title and text on separate lines (text alone when untitled)."""
        return f"{self.title}\n{self.text}" if self.title else self.text


def load_corpus(path: str | Path) -> list[Passage]:
    """Read a JSONL corpus, one `{"id", "title", "text"}` object per line; blank lines are skipped.

    `id` may be a string or an integer (kept as a string); `title` and `text` must be strings, and
    ids must be unique. Any violation raises `CorpusError` naming the file, line and field.
    """
    path = Path(path)
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise CorpusError(f"{where}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}")
            for field, types in (("id", (str, int)), ("title", str), ("text", str)):
                if field not in record:
                    raise CorpusError(f"{where}: field '{field}' is missing")
                if not isinstance(record[field], types) or isinstance(record[field], bool):
                    raise CorpusError(
                        f"{where}: field '{field}' must be "
                        f"{'a string or an integer' if field == 'id' else 'a string'}, "
                        f"got {type(record[field]).__name__}"
                    )
            passage_id = str(record["id"])
            if passage_id in seen:
                raise CorpusError(f"{where}: field 'id' repeats id {passage_id!r} from line {seen[passage_id]}")
            seen[passage_id] = number
            passages.append(Passage(passage_id, record["title"], record["text"]))
    return passages
