"""Parametric knowledge (PK): the LLM writes a background document, as in GenRead (Yu et al., 2023)."""

from __future__ import annotations

from collections.abc import Sequence

from eor.corpus import Passage
from eor.prompts import PK_PROMPT
from eor.retrievers.base import BaseRetriever, Generate


class ParametricRetriever(BaseRetriever):
    """Prompts `generate` once per question and returns its output as the single passage."""

    def __init__(self, generate: Generate, name: str = "PK", prompt: str = PK_PROMPT):
        super().__init__(name)
        self.generate = generate
        self.prompt = prompt

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        documents = self.generate([self.prompt.format(query=q) for q in questions])
        if len(documents) != len(questions):
            raise ValueError(f"generate returned {len(documents)} documents for {len(questions)} prompts")
        return [[Passage(self.name, "", doc)] for doc in documents]
