"""The paper's knowledge-processing ops (section 2.1): @RR, @k, & and @CP.

Each op wraps retrievers into a new retriever whose name is the paper's notation. Operation
priority is @RR > @k > & > @CP, so `BM25@RR@5&Dense@5@CP` summarizes the concatenation of the
reranked-then-truncated BM25 list with the truncated Dense list. Names add parentheses only where
that priority cannot express the tree, e.g. `(BM25@20)@RR` or `(BM25&Dense)@RR@10`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from eor.corpus import Passage
from eor.encoder import Encoder
from eor.prompts import CP_PROMPT
from eor.retrievers.base import Generate, Retriever
from erag.contracts import Reranker

# How tightly each op binds (lower binds tighter); a base retriever is 0.
RERANK, TRUNCATE, CONCAT, COMPRESS = 1, 2, 3, 4


def level(retriever: Retriever) -> int:
    """The priority level of a retriever's outermost op (0 for a base retriever)."""
    return getattr(retriever, "op_level", 0)


def operand(retriever: Retriever, max_level: int) -> str:
    """The name of `retriever` as an operand, parenthesized when it binds looser than allowed."""
    return str(retriever) if level(retriever) <= max_level else f"({retriever})"


class Truncate(Retriever):
    """`child@k`: the top-k passages of the child's ranked list."""

    op_level = TRUNCATE

    def __init__(self, child: Retriever, k: int):
        if k < 1:
            raise ValueError(f"truncation needs k >= 1, got {k}")
        self.child, self.k = child, k

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        return [passages[: self.k] for passages in self.child.retrieve(questions)]

    def __str__(self) -> str:
        return f"{operand(self.child, RERANK)}@{self.k}"


class Concat(Retriever):
    """`a&b&...`: the children's passage lists, concatenated in order."""

    op_level = CONCAT

    def __init__(self, children: Sequence[Retriever]):
        if len(children) < 2:
            raise ValueError("concatenation needs at least two retrievers")
        self.children = list(children)

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        results = [child.retrieve(questions) for child in self.children]
        return [[p for result in results for p in result[i]] for i in range(len(questions))]

    def __str__(self) -> str:
        return "&".join(operand(child, TRUNCATE) for child in self.children)


class Rerank(Retriever):
    """`child@RR`: the child's passages re-sorted by `reranker(question, passages)` scores.

    `op` is the name the op was registered under (``"RR"`` in the paper), so the name round-trips.
    """

    op_level = RERANK

    def __init__(self, child: Retriever, reranker: Reranker, op: str = "RR"):
        self.child, self.reranker, self.op = child, reranker, op

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        ranked = []
        for question, passages in zip(questions, self.child.retrieve(questions)):
            scores = [float(s) for s in self.reranker(question, [p.to_text() for p in passages])] if passages else []
            if len(scores) != len(passages):
                raise ValueError(f"reranker {self.op} returned {len(scores)} scores for {len(passages)} passages")
            order = sorted(range(len(passages)), key=lambda i: -scores[i])
            ranked.append([replace(passages[i], score=scores[i]) for i in order])
        return ranked

    def __str__(self) -> str:
        return f"{operand(self.child, 0)}@{self.op}"


class Compress(Retriever):
    """`child@CP`: an LLM summary of the child's passages (the paper's prompt, `CP_PROMPT`).

    One passage per question; a question whose child returns no passages stays without any.
    """

    op_level = COMPRESS

    def __init__(self, child: Retriever, generate: Generate, op: str = "CP", prompt: str = CP_PROMPT):
        self.child, self.generate, self.op, self.prompt = child, generate, op, prompt

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        results = self.child.retrieve(questions)
        todo = [i for i, passages in enumerate(results) if passages]
        prompts = [
            self.prompt.format(query=questions[i], document="\n".join(p.to_text() for p in results[i])) for i in todo
        ]
        summaries = self.generate(prompts) if prompts else []
        if len(summaries) != len(prompts):
            raise ValueError(f"generate returned {len(summaries)} summaries for {len(prompts)} prompts")
        compressed: list[list[Passage]] = [[] for _ in questions]
        for i, summary in zip(todo, summaries):
            compressed[i] = [Passage(str(self), "", summary)]
        return compressed

    def __str__(self) -> str:
        return f"{operand(self.child, CONCAT)}@{self.op}"


class DenseReranker:
    """The default @RR scorer: cosine similarity between question and passage embeddings."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder

    def __call__(self, question: str, passages: list[str]) -> list[float]:
        vectors = self.encoder.encode([question, *passages])
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return (vectors[1:] @ vectors[0]).tolist()
