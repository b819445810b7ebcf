"""The retriever interface: questions in, ranked passages (with scores) out."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from eor.corpus import Passage

#: A text generator, e.g. an LLM behind its chat template: prompts in, completions out.
Generate = Callable[[list[str]], list[str]]

BASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


class Retriever(ABC):
    """Anything that maps questions to ranked passages.

    `str(retriever)` is its paper-style name (section 2.1): a base retriever's own name, or the
    expression its ops build, e.g. ``BM25@RR@5&Dense@5@CP``; `eor.parse_retriever` reads it back.
    """

    @abstractmethod
    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        """Return, for each question, its passages ranked best first."""

    @abstractmethod
    def __str__(self) -> str: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


class BaseRetriever(Retriever):
    """A retriever over one knowledge source, named by a bare identifier (e.g. ``BM25``, ``SE``)."""

    def __init__(self, name: str):
        if not BASE_NAME.fullmatch(name):
            raise ValueError(f"retriever name {name!r} must match {BASE_NAME.pattern}")
        self.name = name

    def __str__(self) -> str:
        return self.name
