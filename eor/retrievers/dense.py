"""Dense retrieval: an encoder embeds the corpus into a faiss inner-product index."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from eor.corpus import Passage
from eor.encoder import Encoder
from eor.retrievers.base import BaseRetriever


class DenseRetriever(BaseRetriever):
    """Top-`k` passages by inner product between question and passage embeddings.

    index: ``"flat"`` (exact, `IndexFlatIP`), ``"ivf"`` (`IndexIVFFlat` with `nlist` cells, default
    about 4 sqrt(N), searching `nprobe` of them) or ``"hnsw"`` (`IndexHNSWFlat` with `hnsw_m` links
    and `ef_search`). Flat and IVF indexes move to every visible GPU when faiss has GPUs (`gpu=None`
    decides automatically; faiss has no GPU HNSW). `query_encoder` defaults to `encoder` (set it for
    two-tower models such as DPR).
    """

    def __init__(
        self,
        corpus: Sequence[Passage],
        encoder: Encoder,
        k: int = 100,
        name: str = "Dense",
        index: Literal["flat", "ivf", "hnsw"] = "flat",
        query_encoder: Encoder | None = None,
        nlist: int | None = None,
        nprobe: int = 8,
        hnsw_m: int = 32,
        ef_search: int = 128,
        gpu: bool | None = None,
    ):
        super().__init__(name)
        if not corpus:
            raise ValueError("DenseRetriever needs a non-empty corpus")
        self.corpus = list(corpus)
        self.encoder = encoder
        self.query_encoder = query_encoder or encoder
        self.k = min(k, len(self.corpus))
        import faiss  # here, not at the top: `import eor` must work where faiss is not installed

        vectors = encoder.encode([p.to_text() for p in self.corpus])
        self.index = _build_index(vectors, index, nlist, nprobe, hnsw_m, ef_search)
        if index != "hnsw" and (faiss.get_num_gpus() > 0 if gpu is None else gpu):
            self.index = faiss.index_cpu_to_all_gpus(self.index)

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        if not questions:
            return []
        scores, ids = self.index.search(self.query_encoder.encode(list(questions)), self.k)
        return [
            [replace(self.corpus[i], score=float(s)) for i, s in zip(row_ids.tolist(), row_scores.tolist()) if i >= 0]
            for row_ids, row_scores in zip(ids, scores)
        ]


def _build_index(vectors: np.ndarray, kind: str, nlist: int | None, nprobe: int, hnsw_m: int, ef_search: int):
    import faiss

    n, dim = vectors.shape
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "ivf":
        nlist = nlist or max(1, min(n, round(4 * math.sqrt(n))))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.nprobe = min(nprobe, nlist)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = ef_search
    else:
        raise ValueError(f"index must be 'flat', 'ivf' or 'hnsw', got {kind!r}")
    index.add(vectors)
    return index
