"""Retrieval-free generation: a retriever that returns no passages (section 2.1, "ReFree")."""

from __future__ import annotations

from collections.abc import Sequence

from eor.corpus import Passage
from eor.retrievers.base import BaseRetriever


class NoRetriever(BaseRetriever):
    """The singular retriever that reads the query and returns the empty set."""

    def __init__(self, name: str = "ReFree"):
        super().__init__(name)

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        return [[] for _ in questions]
