"""Predictions, one per question, as JSONL (RE-RAG inference, section 2.2; strategies, section 5.1).

`predict`: the RE scores every context and keeps the top-k (`rerag.infer.rerank`); a reader answers from
them (`RAGReader`: fast or thorough marginalization with P_RE, eq. 6, or RALM). The confidence is
a function of max_j s_j over the kept set: the set-level calibrated P(the kept set holds an
answer) when the RE carries one (`rerag calibrate`; `confidence_calibration: "set_level"`), else
max_j RE_ij, RE being the context's `re_prob` (per-context calibrated, or sigmoid(s) as in the
paper; see `rerag.infer.rerank`); `confidence_raw` is always max_j sigmoid(s_j). With a threshold,
a question below it is answered "unanswerable"
(Table 4) or by a parametric reader given no context (the mixed strategy, Table 5). Each line holds
the answer, the reader's answer before thresholding and its log-probability, the confidence, the
strategy and the kept contexts; with gold answers (or `"unanswerable": true`: none exist), also
`answers` and `answerable` (some kept context holds an answer), which
`rerag.infer.unanswerable.report` reads.

`JSONLWriter` writes what `RERAGModule.predict_step` returns under LightningCLI's `rerag predict`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from scipy.special import expit

from erag.contracts import Reader
from rerag.data.fid_format import read_fid
from rerag.defaults import INFER_TOP_K
from rerag.infer.readers import RAGReader
from rerag.infer.rerank import rerank, write_records
from rerag.infer.unanswerable import UNANSWERABLE
from rerag.models.estimator import RelevanceEstimator


def predict(
    records: Iterable[dict],
    estimator: RelevanceEstimator,
    reader: RAGReader,
    top_k: int = INFER_TOP_K,
    threshold: float | None = None,
    fallback: Reader | str = UNANSWERABLE,
    batch_size: int = 8,
    rerank_batch_size: int = 64,
    depth: int | None = None,
) -> Iterator[dict]:
    """Yield one prediction per validated FiD record (see the module docstring); the RE reranks
    each record's first `depth` contexts (None: all).

    `fallback` answers questions whose confidence is below `threshold`: a string is the answer
    itself, a reader (e.g. `ParametricReader`) is called with no contexts. `batch_size`
    questions go to the reader at once."""
    strategy = {
        "mode": reader.mode,
        "marginalization": reader.marginalization if reader.mode == "rag" else None,
        "num_beams": reader.num_beams,
        "top_k": top_k,
        "threshold": threshold,
        "fallback": "unanswerable" if isinstance(fallback, str) else "parametric",
    }
    set_level = estimator.calibration and estimator.calibration.set_level
    calibration = "set_level" if set_level else "per_context" if estimator.calibration else "uncalibrated"
    reranked = rerank(estimator, ({**r, "ctxs": r["ctxs"][:depth]} for r in records), None, rerank_batch_size)
    while chunk := list(itertools.islice(reranked, batch_size)):
        questions, kept = [r["question"] for r in chunk], [r["ctxs"][:top_k] for r in chunk]
        answers = reader.answer(questions, kept, [torch.tensor([c["re_score"] for c in cs]) for cs in kept])
        best = np.array([cs[0]["re_score"] for cs in kept])  # max_j s_j over the kept set
        if set_level:
            confidence = [
                float(set_level(best[i : i + 1], k=top_k, depth=len(record["ctxs"]))[0])
                for i, record in enumerate(chunk)
            ]
        else:
            confidence = [cs[0]["re_prob"] for cs in kept]  # every map s -> re_prob is monotone
        low = [i for i, conf in enumerate(confidence) if threshold is not None and conf < threshold]
        if isinstance(fallback, str):
            replaced = {i: fallback for i in low}
        else:
            replaced = dict(zip(low, fallback([questions[i] for i in low], [[] for _ in low]) if low else []))
        for i, (record, answer) in enumerate(zip(chunk, answers)):
            decision = "reader" if i not in replaced else strategy["fallback"]
            out = {
                "id": record["id"],
                "question": record["question"],
                "answer": replaced.get(i, answer.text),
                "reader_answer": answer.text,
                "reader_logprob": answer.logprob,
                "confidence": confidence[i],
                "confidence_raw": float(expit(best[i])),
                "confidence_calibration": calibration,
                "decision": decision,
                "strategy": strategy,
                "contexts": [{k: c[k] for k in ("id", "title", "re_score", "re_prob", "has_answer")} for c in kept[i]],
            }
            if record["answers"] or record.get("unanswerable"):  # gold known (SQuAD 2.0: no answer exists)
                out["answers"] = record["answers"]
                out["answerable"] = any(c["has_answer"] for c in kept[i])
            yield out


def predict_file(
    input_path: str | Path, output_path: str | Path, estimator: RelevanceEstimator, reader: RAGReader, **kwargs
) -> int:
    """Validate `input_path` (FiD JSON or JSONL; answers optional), write predictions as JSONL."""
    records = read_fid(input_path, require_answers=False)
    return write_records(output_path, predict(records, estimator, reader, **kwargs))


def predict_saved(
    input: str,
    output: str,
    checkpoint: str | None = None,
    export_dir: str | None = None,
    top_k: int = INFER_TOP_K,
    mode: str = "rag",
    marginalization: str = "fast",
    num_beams: int = 1,
    llm: str | None = None,
    threshold: float | None = None,
    fallback_llm: str | None = None,
    batch_size: int = 8,
    depth: int | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> int:
    """`predict_file` with saved models (`rerag predict-file`'s arguments): the RE of `checkpoint` or
    `export_dir`, its generator as the reader (or the Hugging Face LM `llm`), and with `threshold`
    "unanswerable" (or `fallback_llm`'s closed-book answer) below it. Returns the predictions written."""
    from erag.lm import load_lm
    from rerag.infer.loading import default_device, load_models
    from rerag.infer.readers import ParametricReader

    estimator, generator = load_models(checkpoint, export_dir, trust_remote_code)
    device = default_device(device)
    lm = load_lm(llm, trust_remote_code) if llm else generator.as_lm()
    reader = RAGReader(lm.to(device), mode, marginalization, num_beams=num_beams)
    fallback = ParametricReader(load_lm(fallback_llm, trust_remote_code).to(device)) if fallback_llm else UNANSWERABLE
    return predict_file(
        input,
        output,
        estimator.to(device),
        reader,
        top_k=top_k,
        threshold=threshold,
        fallback=fallback,
        batch_size=batch_size,
        depth=depth,
    )


class JSONLWriter(BasePredictionWriter):
    """Writes `RERAGModule.predict_step`'s dicts as JSONL for LightningCLI's `rerag predict`:
    `--trainer.callbacks+=rerag.infer.predict.JSONLWriter --trainer.callbacks.path=preds.jsonl`.
    With several processes each writes its own file, `preds.rank<r>.jsonl`."""

    def __init__(self, path: str = "outputs/predictions.jsonl"):
        super().__init__(write_interval="batch")
        self.path = Path(path)

    def on_predict_start(self, trainer, pl_module) -> None:
        if trainer.world_size > 1:
            self.path = self.path.with_suffix(f".rank{trainer.global_rank}{self.path.suffix}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")

    def write_on_batch_end(
        self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx=0
    ) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in prediction)
