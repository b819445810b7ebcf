"""Ensemble of Retrievers (EoR; Li et al., "Unraveling and Mitigating Retriever Inconsistencies in
Retrieval-Augmented Large Language Models"): retrievers and their ops, the voter, its weight
search, and the retriever-inconsistency analysis. Builds on `erag`'s shared vocabulary (answer
matching, the reader and reranker contracts) and never imports `rerag`.
"""

from eor.analysis import ErrorDecomposition, contains, error_decomposition, mrlr, mrwr, oracle_upper_bound, rwr_matrix
from eor.corpus import CorpusError, Passage, load_corpus
from eor.encoder import Encoder
from eor.evaluate import EoRConfig, EoRReport, evaluate_eor
from eor.learning import SearchConfig, learn_weights, voter_accuracy
from eor.naming import Registry, RetrieverNameError, parse_retriever
from eor.ops import Compress, Concat, DenseReranker, Rerank, Reranker, Truncate
from eor.plots import plot_boxplot, plot_heatmap
from eor.prompts import CP_PROMPT, PK_PROMPT, RALM_PROMPT, RETRIEVAL_FREE_PROMPT
from eor.reader import PoolOutput, Reader, read_pool
from eor.retrievers import (
    BaseRetriever,
    BM25Retriever,
    DenseRetriever,
    Generate,
    NoRetriever,
    ParametricRetriever,
    Retriever,
    WebSearchRetriever,
)
from eor.similarity import (
    BERTScore,
    EmbeddingSimilarity,
    ExactMatch,
    NLIEntailment,
    Similarity,
    TokenF1,
    build_metric,
    similarity_tensor,
)
from eor.voter import POOLINGS, Voter, VoterWeights, pool, select, voter_scores

__all__ = [
    "BERTScore",
    "BM25Retriever",
    "BaseRetriever",
    "CP_PROMPT",
    "Compress",
    "Concat",
    "CorpusError",
    "DenseReranker",
    "DenseRetriever",
    "EmbeddingSimilarity",
    "Encoder",
    "EoRConfig",
    "EoRReport",
    "ErrorDecomposition",
    "ExactMatch",
    "Generate",
    "NLIEntailment",
    "NoRetriever",
    "PK_PROMPT",
    "POOLINGS",
    "ParametricRetriever",
    "Passage",
    "PoolOutput",
    "RALM_PROMPT",
    "RETRIEVAL_FREE_PROMPT",
    "Reader",
    "Registry",
    "Rerank",
    "Reranker",
    "Retriever",
    "RetrieverNameError",
    "SearchConfig",
    "Similarity",
    "TokenF1",
    "Truncate",
    "Voter",
    "VoterWeights",
    "WebSearchRetriever",
    "build_metric",
    "contains",
    "error_decomposition",
    "evaluate_eor",
    "learn_weights",
    "load_corpus",
    "mrlr",
    "mrwr",
    "oracle_upper_bound",
    "parse_retriever",
    "plot_boxplot",
    "plot_heatmap",
    "pool",
    "read_pool",
    "rwr_matrix",
    "select",
    "similarity_tensor",
    "voter_accuracy",
    "voter_scores",
]
