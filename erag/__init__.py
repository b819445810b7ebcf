"""eRAG: evaluating retrieval quality in retrieval-augmented generation (Salemi & Zamani, SIGIR 2024).

Each retrieved document is given alone to the RAG system's reader; the reader's downstream score on
that document is its relevance label (eq. 1), and retrieval metrics over those labels evaluate the
ranked list. This package stands alone: it never imports ``rerag`` or ``eor``.
"""

from .annotate import annotate, per_document_outputs
from .answers import exact_match, has_answer, normalize_answer, token_f1
from .baselines import contains_answer_labels, llm_judge_labels
from .callback import ERAGCallback
from .contracts import Reader, Reranker
from .correlation import correlate
from .downstream import DOWNSTREAM_METRICS, accuracy, rouge_l
from .end_to_end import compare_with_end_to_end, end_to_end_scores
from .evaluate import evaluate
from .readers import HFReader
from .report import write_report
from .retrieval_metrics import score_labels

__all__ = [
    "DOWNSTREAM_METRICS",
    "ERAGCallback",
    "HFReader",
    "Reader",
    "Reranker",
    "accuracy",
    "annotate",
    "compare_with_end_to_end",
    "contains_answer_labels",
    "correlate",
    "end_to_end_scores",
    "evaluate",
    "exact_match",
    "has_answer",
    "llm_judge_labels",
    "normalize_answer",
    "per_document_outputs",
    "rouge_l",
    "score_labels",
    "token_f1",
    "write_report",
]
