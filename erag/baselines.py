"""Baseline relevance labelings that eRAG is compared with (§2, §3.1, Table 1).

- "Containing the answer": a document is relevant when it contains a gold answer, matched as in
  DPR (Karpukhin et al., 2020): NFD-normalized, lower-cased token sequences.
- Provenance labels (e.g. KILT's): given by the user, one 0/1 label per retrieved document.
- Relevance annotation with an LLM: a reader prompted to say whether the document is relevant,
  its yes/no answer parsed into 1/0 (after Thomas et al., 2023).
"""

from __future__ import annotations

import re

from .annotate import per_document_outputs
from .answers import has_answer
from .contracts import ExpectedOutputs, Reader, RetrievalResults, validate_inputs
from .prompts import JUDGE_PROMPT


def contains_answer_labels(
    retrieval_results: RetrievalResults, expected_outputs: ExpectedOutputs
) -> dict[str, list[float]]:
    """``{query_id: [1.0 if the document contains a gold answer else 0.0, ...]}``."""
    validate_inputs(retrieval_results, expected_outputs)
    return {
        qid: [float(has_answer(doc, expected_outputs[qid])) for doc in record["documents"]]
        for qid, record in retrieval_results.items()
    }


def parse_yes_no(text: str) -> float:
    """1.0 when the judge's answer starts with "yes" (any case, after punctuation), else 0.0."""
    return float(re.match(r"\W*yes\b", text, re.IGNORECASE) is not None)


def llm_judge_labels(
    retrieval_results: RetrievalResults,
    judge: Reader,
    batch_size: int = 32,
    prompt: str = JUDGE_PROMPT,
) -> dict[str, list[float]]:
    """Labels from a reader asked, for each (query, document), whether the document is relevant.

    ``prompt`` is formatted with ``question`` and given to ``judge`` as the question, with the
    document as its only context; unparsable answers count as "no".
    """
    asked = {
        qid: {"question": prompt.format(question=record["question"]), "documents": record["documents"]}
        for qid, record in retrieval_results.items()
    }
    outputs = per_document_outputs(asked, judge, batch_size)
    return {qid: [parse_yes_no(answer) for answer in answers] for qid, answers in outputs.items()}
