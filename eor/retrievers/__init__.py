"""Base retrievers, one per knowledge source (section 2.1)."""

from eor.retrievers.base import BaseRetriever, Generate, Retriever
from eor.retrievers.bm25 import BM25Retriever
from eor.retrievers.dense import DenseRetriever
from eor.retrievers.none import NoRetriever
from eor.retrievers.parametric import ParametricRetriever
from eor.retrievers.web import WebSearchRetriever

__all__ = [
    "BM25Retriever",
    "BaseRetriever",
    "DenseRetriever",
    "Generate",
    "NoRetriever",
    "ParametricRetriever",
    "Retriever",
    "WebSearchRetriever",
]
