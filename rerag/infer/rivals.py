"""The RE's rivals on the same passages, written as result rows that `rerag compare` reads beside a
`rerag test` run: UPR (`rerag.infer.upr`, the zero-shot question likelihood under an LM), a dense
bi-encoder's cosine (all-MiniLM-L6-v2 unless another encoder is named) and, to time it the same way,
an exported RE itself (`estimator_scorer`, as `rerag rerank` scores), each over the first
`contexts` passages of each question of a FiD file, as `rerag test` reads them (its
`n_eval_contexts`). The retriever's own order is the file's, which `rerag compare --retriever` adds.

A row holds the question's id, the rival's scores of its passages and the rank of the first
relevant passage in the rival's order (`first_hit.re`, where a test run keeps the RE's; `gold` where
every passage says, and `has_answer`), and the same in the file's order (`first_hit.retriever`). It
has no answer: a rival ranks, it does not read. The summary adds the scoring cost per passage."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from rerag.data.fid_format import read_fid
from rerag.defaults import DENSE_ENCODER, EVAL_CONTEXTS
from rerag.inputs import passage_text
from rerag.metrics import first_hit_rank

#: Scores (questions, their passages) -> one tensor of passage scores per question, higher ranks first.
Scorer = Callable[[Sequence[str], Sequence[Sequence[dict]]], list[torch.Tensor]]


def dense_scorer(encoder: str = DENSE_ENCODER, batch_size: int = 64) -> Scorer:
    """Cosine of the question's and each passage's (title, newline, text) sentence-transformers
    embeddings (L2-normalized: the inner product)."""
    from sentence_transformers import SentenceTransformer

    from erag.lm import resolve

    model = SentenceTransformer(resolve(encoder), device="cpu")

    def embed(texts: list[str]) -> torch.Tensor:
        return model.encode(texts, batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True)

    def score(questions: Sequence[str], contexts: Sequence[Sequence[dict]]) -> list[torch.Tensor]:
        q = embed(list(questions))
        per_question = torch.split(
            embed([passage_text(c) for cs in contexts for c in cs]), [len(cs) for cs in contexts]
        )
        return [passages @ q[i] for i, passages in enumerate(per_question)]

    return score


def estimator_scorer(folder: str | Path, batch_size: int = 64) -> Scorer:
    """An exported RE's log-odds s (`RelevanceEstimator.predict`: every pair of the file in
    length-sorted batches, each passage's windows pooled where the RE was evaluated by windows), on
    the CPU in float32, as UPR is scored."""
    from rerag.infer.loading import load_estimator

    estimator = load_estimator(folder, device="cpu")

    def score(questions: Sequence[str], contexts: Sequence[Sequence[dict]]) -> list[torch.Tensor]:
        s = estimator.predict([(q, c) for q, cs in zip(questions, contexts) for c in cs], batch_size)
        return list(torch.split(s, [len(cs) for cs in contexts]))

    return score


def result_rows(records: Sequence[dict], scores: Sequence[torch.Tensor]) -> list[dict]:
    """Each record's result row under `scores` (module docstring)."""
    rows = []
    for record, s in zip(records, scores):
        ctxs = record["ctxs"][: len(s)]
        relevance = {"has_answer": torch.tensor([bool(c.get("has_answer")) for c in ctxs])}
        if all(c.get("gold") is not None for c in ctxs):
            relevance["gold"] = torch.tensor([bool(c["gold"]) for c in ctxs])
        order = -torch.arange(len(ctxs), dtype=torch.float32)  # the file's first passage highest
        rows.append(
            {
                "id": record["id"],
                "question": record["question"],
                "contexts": [{"id": c.get("id"), "score": float(x)} for c, x in zip(ctxs, s)],
                "first_hit": {
                    name: {k: first_hit_rank(by, rel) for k, rel in relevance.items()}
                    for name, by in (("re", s), ("retriever", order))
                },
            }
        )
    return rows


def score_file(
    scorer: Scorer,
    name: str,
    input: str | Path,
    out: str | Path,
    contexts: int = EVAL_CONTEXTS,
    questions: int | None = None,
) -> dict:
    """Score the first `contexts` passages of each question of the FiD file `input` (its first
    `questions`; None: all) with `scorer`, write the result rows to `out` (JSONL) and a summary to
    `out` with `.summary.json`: the rival's `name`, questions, passages, seconds and milliseconds per
    passage."""
    records = [{**r, "ctxs": r["ctxs"][:contexts]} for r in itertools.islice(read_fid(input), questions)]
    start = time.perf_counter()
    scores = scorer([r["question"] for r in records], [r["ctxs"] for r in records])
    seconds = time.perf_counter() - start
    rows = result_rows(records, scores)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    passages = sum(len(r["ctxs"]) for r in records)
    summary = {
        "rival": name,
        "input": str(input),
        "questions": len(rows),
        "passages": passages,
        "seconds": round(seconds, 2),
        "ms_per_passage": round(1000 * seconds / max(passages, 1), 2),
    }
    out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
