"""`rerag eor`: the Ensemble of Retrievers evaluated on a trained RE-RAG model.

The pool (paper-style names, section 2.1 of the EoR paper) is built from BM25, dense retrieval,
retrieval-free answering (ReFree), the LM's own background document (PK), the RE as the @RR
reranker, the LM's summary as the @CP compressor, and `&` concatenation (web search, SE, needs a
search backend and is left to `eor.WebSearchRetriever`'s users). By default every retriever's
passages are read by the trained generator with RE-weighted marginalization (RE-RAG eq. 6); with
an `llm`, as in the EoR paper, by that LM with its RALM prompts (appendix C.2).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from eor import (
    RALM_PROMPT,
    RETRIEVAL_FREE_PROMPT,
    BM25Retriever,
    DenseRetriever,
    Encoder,
    EoRConfig,
    EoRReport,
    NoRetriever,
    ParametricRetriever,
    Passage,
    Registry,
    evaluate_eor,
    load_corpus,
)
from erag.lm import load_lm, resolve
from erag.served import ServedConfig, served_lm
from rerag.data.fid_format import read_fid
from rerag.defaults import DENSE_ENCODER
from rerag.infer.loading import models_for_evaluation
from rerag.infer.readers import ParametricReader, RAGReader


class PoolReader:
    """The RE-RAG pair as one reader for the whole pool: RE-weighted RAG over the given contexts,
    and the generator alone for a retrieval-free retriever (no contexts)."""

    def __init__(self, rag: RAGReader, parametric: ParametricReader):
        self.rag, self.parametric = rag, parametric

    def __call__(self, questions: list[str], contexts: list[list[str]]) -> list[str]:
        answers = [""] * len(questions)
        with_ctx = [i for i, cs in enumerate(contexts) if cs]
        without = [i for i, cs in enumerate(contexts) if not cs]
        if with_ctx:
            for i, a in zip(with_ctx, self.rag([questions[i] for i in with_ctx], [contexts[i] for i in with_ctx])):
                answers[i] = a
        if without:
            for i, a in zip(without, self.parametric([questions[i] for i in without])):
                answers[i] = a
        return answers


def run_eor(
    *,
    questions_file: str,
    corpus_file: str,
    pool: list[str] = ["BM25@5", "Dense@5", "BM25@RR@5", "BM25@3&Dense@3", "ReFree"],
    candidates: int = 100,
    dense_encoder: str = DENSE_ENCODER,
    max_questions: int | None = None,
    output_dir: str = "outputs/eor",
    eor: EoRConfig = EoRConfig(),
    test_file: str | None = None,
    llm: str | None = None,
    served: ServedConfig = ServedConfig(),
    checkpoint: str | None = None,
    estimator: str | None = None,
) -> EoRReport:
    """Evaluate each retriever of `pool` and EoR over it, read by any LM (or a RE-RAG checkpoint's generator).

    Args:
        questions_file: a FiD-format file; its questions and answers are used, its contexts not.
        corpus_file: JSONL passages `{"id", "title", "text"}` (`rerag make-demo-data` writes one).
        pool: retriever names over the bases BM25, Dense, ReFree, PK and the ops @RR (the trained RE) and @CP.
        candidates: passages each base retriever returns before any op.
        dense_encoder: a sentence-transformers or HF encoder folder (`package:path` allowed).
        max_questions: evaluate only the first N questions.
        output_dir: where eor_report.json, the weights and the plots go.
        eor: the voter's metrics, train split and weight search (`eor.EoRConfig`).
        test_file: a FiD file of test questions (the paper's protocol): the weights are learned on all of
            `questions_file` (the validation split) and reported on these; `eor.train_fraction` is then unused.
        llm: a Hugging Face LM (causal through its chat template, or seq2seq) that reads every retriever's
            passages in one prompt with the paper's RALM prompts and writes PK documents and @CP summaries;
            or an exported generator folder (`rerag export`, the shipped `rerag:assets/reader`), read as a
            checkpoint's generator is (default: the checkpoint's generator, RE-weighted, which writes PK and
            @CP text of answer length); `served`: the OpenAI-compatible endpoint of `served`, read as an LM is.
        served: the endpoint `--llm served` reads through (`erag.served.ServedConfig`; its key comes from
            the environment variable it names).
        checkpoint: a RE-RAG Lightning checkpoint (`rerag fit` writes them): its generator reads unless
            `llm` is given, its RE is the @RR reranker and weighs the generator's per-passage answers.
        estimator: an exported RE folder (`rerag export`, or the shipped `rerag:assets/relevance_estimator`)
            for @RR and the answer weights, in place of the checkpoint's.
    """
    remote = served_lm(llm, served)
    estimator, generator, llm = models_for_evaluation(checkpoint, estimator, llm)
    if estimator is None and any("@RR" in name for name in pool):
        raise ValueError(f"pool: {[n for n in pool if '@RR' in n]} rerank with an RE: give --estimator or --checkpoint")
    score = estimator.score if estimator is not None else None
    records = list(read_fid(questions_file))[:max_questions]
    test_indices = None
    if test_file:
        test_records = list(read_fid(test_file))[:max_questions]
        test_indices = range(len(records), len(records) + len(test_records))
        records += test_records
    corpus: list[Passage] = load_corpus(corpus_file)
    lm = remote or (load_lm(llm) if llm else generator.as_lm())

    def write(prompts: list[str]) -> list[str]:  # PK documents and @CP summaries
        return lm.generate(prompts)[0]

    bases = [BM25Retriever(corpus, k=candidates), NoRetriever(), ParametricRetriever(write)]
    if any("Dense" in name for name in pool):
        bases.append(DenseRetriever(corpus, Encoder(resolve(dense_encoder)), k=candidates))
    registry = Registry(bases, rerankers={"RR": score} if score else {}, compressors={"CP": write})
    if llm:
        reader = PoolReader(
            RAGReader(lm, mode="ralm", template=RALM_PROMPT), ParametricReader(lm, template=RETRIEVAL_FREE_PROMPT)
        )
    else:  # retrieval-free: the generator's own input format with an empty context
        reader = PoolReader(RAGReader(lm, reranker=score), ParametricReader(lm, template=generator.template))
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = EoRConfig(
        **{
            **asdict(eor),
            "search": eor.search,
            "plots_dir": eor.plots_dir or str(out),
            "save_weights": eor.save_weights or str(out / "eor_weights.json"),
        }
    )
    report = evaluate_eor(
        [r["question"] for r in records],
        [r["answers"] for r in records],
        [registry.build(name) for name in pool],
        reader,
        config,
        test_indices=test_indices,
    )
    (out / "eor_report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    print(report.table())
    return report
