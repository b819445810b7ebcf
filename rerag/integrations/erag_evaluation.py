"""`rerag erag` and the eRAG callback's hooks: evaluate the RE's ranking (or the retriever's)
with eRAG, the trained generator reading each ranked document alone as the judge."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import lightning as L
import torch

import erag
from erag.lm import load_lm
from erag.served import ServedConfig, served_lm
from rerag.data.fid_format import read_fid
from rerag.data.ir_formats import write_qrels
from rerag.defaults import ERAG_TOP_K
from rerag.infer.loading import models_for_evaluation
from rerag.infer.readers import RAGReader
from rerag.inputs import passage_text
from rerag.models.estimator import RelevanceEstimator


def rank_records(records: list[dict], estimator: RelevanceEstimator | None, top_k: int) -> tuple[dict, dict]:
    """eRAG's inputs: each question's top-k documents (and their ids, `document_ids`), by the RE's
    score (or, with no estimator, in the file's retriever order), and its gold answers; keyed by
    record id."""
    results, expected = {}, {}
    for r in records:
        ctxs = r["ctxs"]
        if estimator is not None:
            order = torch.argsort(estimator.score(r["question"], ctxs), descending=True, stable=True).tolist()
            ctxs = [ctxs[j] for j in order]
        results[r["id"]] = {
            "question": r["question"],
            "documents": [passage_text(c) for c in ctxs[:top_k]],
            "document_ids": [c["id"] for c in ctxs[:top_k]],
        }
        expected[r["id"]] = list(r["answers"])
    return results, expected


def erag_qrels(results: dict, labels: dict[str, list[float]], threshold: float) -> dict[str, dict[str, int]]:
    """eRAG's labels as integer qrels: a document is relevant (1) where its label is at least `threshold`."""
    return {
        qid: {docid: int(label >= threshold) for docid, label in zip(results[qid]["document_ids"], labels[qid])}
        for qid in results
    }


def generator_reader(pl_module: L.LightningModule) -> RAGReader:
    """The module's generator as an eRAG judge (a reader; one document at a time in eRAG)."""
    return RAGReader(pl_module.generator.as_lm())


def validation_rankings(
    trainer: L.Trainer, pl_module: L.LightningModule, top_k: int = ERAG_TOP_K, max_questions: int = 64
) -> tuple[dict, dict]:
    """The RE's top-k for the first validation questions: `ERAGCallback(ranking=...)`."""
    val = trainer.datamodule.records("val")
    records = [val[i] for i in range(min(max_questions, len(val)))]
    with torch.no_grad():
        return rank_records(records, pl_module.estimator, top_k)


def run_erag(
    *,
    data_file: str,
    ranking: Literal["re", "retriever"] = "re",
    top_k: int = ERAG_TOP_K,
    metrics: list[str] = ["P@5", "R@5", "MAP", "MRR", "NDCG@10", "Hit@5"],
    downstream_metric: str = "em",
    max_questions: int | None = None,
    output_dir: str = "outputs/erag",
    reader: Literal["rag", "ralm", "fid"] = "rag",
    llm: str | None = None,
    served: ServedConfig = ServedConfig(),
    checkpoint: str | None = None,
    estimator: str | None = None,
    qrels: str | None = None,
    qrels_threshold: float = 0.5,
) -> dict:
    """Evaluate a ranking of `data_file`'s contexts with eRAG and correlate it with end-to-end EM.

    Args:
        data_file: a FiD-format file with answers: any retriever's run.
        ranking: "re" ranks each question's contexts by the RE, "retriever" keeps the file's order.
        top_k: documents per ranked list.
        metrics: eRAG retrieval metrics (P@k, R@k, MAP, MRR, NDCG@k, Hit@k).
        downstream_metric: em, f1, accuracy (FEVER labels), rougeL or contains (erag.downstream).
        max_questions: evaluate only the first N questions.
        output_dir: where erag_report.json and erag_scatter.png go.
        reader: how the generator reads a list: rag = each document alone, answers marginalized with
            P_RE (so the end-to-end answer is one of the per-document answers eRAG labels);
            ralm = the documents in one prompt (in-prompt augmentation); fid = Fusion-in-Decoder, each
            document encoded alone and decoded together (the eRAG paper's reader; an encoder-decoder
            only). eRAG's per-document labels read one document each way.
        llm: a Hugging Face LM (folder, name or GGUF file) that judges and reads end to end (its own
            prompt template), or an exported generator folder (`rerag:assets/reader`); default: the
            checkpoint's generator; `served`: the OpenAI-compatible endpoint of `served` (with --reader ralm).
        served: the endpoint `--llm served` reads through (`erag.served.ServedConfig`; its key comes from
            the environment variable it names).
        checkpoint: a RE-RAG Lightning checkpoint: its generator reads unless `llm` is given; its RE ranks.
        estimator: an exported RE folder that ranks (and weighs answers) in place of the checkpoint's.
        qrels: also write eRAG's per-document labels as TREC qrels (qid 0 docid rel) for ir-measures, ranx or
            trec_eval: rel 1 where the reader's downstream score on the document alone is at least qrels_threshold.
        qrels_threshold: see qrels (EM labels are 0 or 1 already; F1 or ROUGE labels are graded).
    """
    remote = served_lm(llm, served)
    if remote is not None and reader == "rag":
        raise ValueError(
            "a served reader gives no log-likelihoods: --reader rag fuses per-document answers by them; use --reader ralm"
        )
    estimator, generator, llm = models_for_evaluation(checkpoint, estimator, llm)
    if ranking == "re" and estimator is None:
        raise ValueError("ranking: 're' ranks with an RE: give --estimator or --checkpoint, or --ranking retriever")
    records = list(read_fid(data_file))[:max_questions]
    with torch.no_grad():
        results, expected = rank_records(records, estimator if ranking == "re" else None, top_k)
        lm = remote or (load_lm(llm) if llm else generator.as_lm())
        result = erag.compare_with_end_to_end(
            results,
            expected,
            RAGReader(lm, mode=reader, reranker=estimator.score if estimator is not None else None),
            downstream_metric,
            metrics,
        )
    result["reader"] = (
        {"name": f"{remote.model} served at {served.base_url}", "parameters": None}
        if remote is not None
        else {"name": llm or "the RE-RAG generator", "parameters": sum(p.numel() for p in lm.model.parameters())}
    )
    out = Path(output_dir)
    erag.write_report(result, out / "erag_report.json", out / "erag_scatter.png")
    if qrels is not None:
        write_qrels(qrels, erag_qrels(results, result["labelings"]["erag"]["labels"], qrels_threshold))
    print(f"end-to-end {downstream_metric}: {result['end_to_end']['aggregated']:.4f}")
    for name, scored in result["labelings"].items():
        tau = {
            m: f"undefined: {c['undefined']}" if c["undefined"] else round(c["kendall_tau"], 3)
            for m, c in result["correlation"][name].items()
        }
        print(f"{name}: { ({m: round(v, 4) for m, v in scored['aggregated'].items()}) }  kendall tau: {tau}")
    return result
