"""Sparse retrieval with BM25 (bm25s) over a passage corpus."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from eor.corpus import Passage
from eor.retrievers.base import BaseRetriever


def import_bm25s():
    """bm25s, imported on first use. bm25s imports JAX when it is installed, and JAX then takes 75%
    of the GPU's memory on its first use unless told not to, which would leave a CUDA training run
    short of memory."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import bm25s

    return bm25s


class BM25Retriever(BaseRetriever):
    """Indexes `title + text` of every passage and returns the top `k` by BM25 score."""

    def __init__(self, corpus: Sequence[Passage], k: int = 100, name: str = "BM25", stopwords: str = "en"):
        super().__init__(name)
        if not corpus:
            raise ValueError("BM25Retriever needs a non-empty corpus")
        self.corpus = list(corpus)
        self.k = min(k, len(self.corpus))
        self.stopwords = stopwords
        bm25s = import_bm25s()
        self.index = bm25s.BM25()
        tokens = bm25s.tokenize([p.to_text() for p in self.corpus], stopwords=stopwords, show_progress=False)
        self.index.index(tokens, show_progress=False)

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        if not questions:
            return []
        bm25s = import_bm25s()
        tokens = bm25s.tokenize(list(questions), stopwords=self.stopwords, return_ids=False, show_progress=False)
        ids, scores = self.index.retrieve(tokens, k=self.k, show_progress=False)
        return [
            [replace(self.corpus[i], score=s) for i, s in zip(row_ids.tolist(), row_scores.tolist())]
            for row_ids, row_scores in zip(ids, scores)
        ]
