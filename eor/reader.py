"""Run the reader over every retriever in the pool: y_m = G(q, r_m(q)) (section 4.1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eor.retrievers.base import Retriever
from erag.contracts import Reader
from erag.progress import progress


@dataclass
class PoolOutput:
    """What each retriever's RALM produced: names [R], answers [R][Q], contexts [R][Q][k]."""

    names: list[str]
    answers: list[list[str]]
    contexts: list[list[list[str]]]


def read_pool(
    retrievers: Sequence[Retriever], reader: Reader, questions: Sequence[str], batch_size: int = 16
) -> PoolOutput:
    """Retrieve with each retriever and answer with `reader`, `batch_size` questions per call."""
    names = [str(r) for r in retrievers]
    if len(set(names)) != len(names):
        raise ValueError(f"retriever names in a pool must be unique: {names}")
    answers: list[list[str]] = []
    contexts: list[list[list[str]]] = []
    for retriever in retrievers:
        answers.append([])
        contexts.append([])
        for start in progress(range(0, len(questions), batch_size), f"read {retriever}", unit="batches"):
            batch = list(questions[start : start + batch_size])
            texts = [[p.to_text() for p in passages] for passages in retriever.retrieve(batch)]
            batch_answers = reader(batch, texts)
            if len(batch_answers) != len(batch):
                raise ValueError(f"reader returned {len(batch_answers)} answers for {len(batch)} questions")
            answers[-1].extend(batch_answers)
            contexts[-1].extend(texts)
    return PoolOutput(names, answers, contexts)
