"""Rerank FiD-format records with the trained RE (section 2.2, "Reranking of contexts by relevance").

Each context gets the RE's log-odds s = z_true - z_false (eq. 4; two LM-head rows, never the
vocabulary softmax) as `re_score` and a probability as `re_prob`: the RE's per-context calibration
P(has answer | s) when it carries one (`rerag calibrate`), else RE = sigmoid(s) (eq. 3), which the
losses never tie to a probability. The record's `re_prob_calibrated` (true/false) says which.
Contexts are sorted by s, best first, and cut to `top_k`. A record with fewer contexts than `top_k`
keeps them all. The rest of the record, the retriever's `score` included, is kept as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from erag.progress import progress
from rerag.data.fid_format import read_fid
from rerag.data.ir_formats import write_trec_run
from rerag.models.estimator import RelevanceEstimator


def rerank(
    estimator: RelevanceEstimator, records: Iterable[dict], top_k: int | None = None, batch_size: int = 64
) -> Iterator[dict]:
    """Yield each record with its contexts reranked by the RE (eval mode, on its device).
    A question's contexts go through the RE `batch_size` at a time; `top_k` None keeps them all."""
    calibrator = estimator.calibration.per_context if estimator.calibration is not None else None
    for record in records:
        if not record["question"].strip():  # read_fid rejects these in files; records built in code may not
            raise ValueError(f"record id {record.get('id')!r}: the question is empty")
        s = estimator.score(record["question"], record["ctxs"], batch_size).float().cpu()
        order = torch.argsort(s, descending=True, stable=True)[:top_k].tolist()
        p = calibrator(s.numpy()).tolist() if calibrator is not None else torch.sigmoid(s).tolist()
        yield {
            **record,
            "re_prob_calibrated": calibrator is not None,
            "ctxs": [{**record["ctxs"][j], "re_score": s[j].item(), "re_prob": p[j]} for j in order],
        }


def write_records(path: str | Path, records: Iterable[dict]) -> int:
    """Write records as JSONL, or as one JSON list when the name ends with `.json`, reporting
    progress (`erag.progress`); returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    as_list, n = path.suffix == ".json", 0
    with path.open("w", encoding="utf-8") as f:
        f.write("[\n" if as_list else "")
        for record in progress(records, path.name, unit="questions"):
            f.write(
                ("" if not as_list or n == 0 else ",\n")
                + json.dumps(record, ensure_ascii=False)
                + ("" if as_list else "\n")
            )
            n += 1
        f.write("\n]\n" if as_list else "")
    return n


def rerank_file(
    estimator: RelevanceEstimator,
    input_path: str | Path,
    output_path: str | Path,
    top_k: int | None = None,
    batch_size: int = 64,
    trec_run: str | Path | None = None,
) -> int:
    """Validate `input_path` (FiD JSON or JSONL; answers optional), rerank it, write `output_path`
    and, with `trec_run`, the RE's order as a TREC run (`rerag.data.ir_formats.write_trec_run`)."""
    ranking = {}

    def kept(records: Iterable[dict]) -> Iterator[dict]:
        for record in records:
            ranking[record["id"]] = [(c["id"], c["re_score"]) for c in record["ctxs"]]
            yield record

    records = read_fid(input_path, require_answers=False)
    n = write_records(output_path, kept(rerank(estimator, records, top_k, batch_size)))
    if trec_run is not None:
        write_trec_run(trec_run, ranking, tag="rerag")
    return n
