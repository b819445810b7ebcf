"""Evaluation: the RE's scores of a batch's contexts, answers read from its top k and marginalized
(RE-RAG 2.2, eq. 6), the retriever-order baseline, per-question results and the metrics over them.
`Evaluator.read` is the one pass every evaluation and prediction makes."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torchmetrics import MeanMetric, MetricCollection

from erag.answers import exact_match, token_f1
from rerag.data.datamodule import first_contexts, first_rows
from rerag.decoding import marginalize_answers, top_k_per_question
from rerag.defaults import TEST_TOP_K, VAL_TOP_K
from rerag.metrics import first_hit_rank, recall_at_k
from rerag.models.estimator import RelevanceEstimator, WindowPooling, pool_windows
from rerag.models.generator import Generator


@dataclass(frozen=True)
class EvaluationSpec:
    """How a fit evaluates and predicts (`model.evaluation`). These settings shape evaluation, not the
    weights: with --ckpt_path a config's and a command line's values hold over the checkpoint's.

    Args:
        val_top_k: contexts the RE keeps for dev answers (paper 10); at least 1.
        test_top_k: contexts the RE (and the retriever baseline) keeps for test and predicted answers
            (paper 25); at least 1.
        num_beams: beams per context when generating (1: greedy); at least 1.
        score_batch_size: rows per forward pass without gradients: the RE's at evaluation, the teacher's
            when it builds its cache; at least 1.
        recall_ks: Recall@k cut-offs logged at evaluation.
        eval_depths: also rerank only the retriever's first d contexts (metrics <stage>/top<d>/...).
        window_pooling: where data.init_args.eval_context_words cuts dev/test passages into windows, a
            passage's s from its windows': max (MaxP), mean, or first (FirstP); `rerag export` keeps it.
    """

    val_top_k: int = VAL_TOP_K
    test_top_k: int = TEST_TOP_K
    num_beams: int = 1
    score_batch_size: int = 128
    recall_ks: list[int] = field(default_factory=lambda: [1, 5, 10, 20])
    eval_depths: list[int] = field(default_factory=list)
    window_pooling: WindowPooling = "max"

    def check(self) -> None:
        """A setting out of its range, named (`model.evaluation.<field>`)."""
        for name in ("val_top_k", "test_top_k", "num_beams", "score_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"model.evaluation.{name}: must be at least 1, got {getattr(self, name)}")

    def top_k(self, stage: str) -> int:
        """The contexts the RE keeps for a stage's answers: val_top_k for val, test_top_k otherwise."""
        return self.val_top_k if stage == "val" else self.test_top_k


torch.serialization.add_safe_globals([EvaluationSpec])  # checkpoints' hyperparameters hold it

#: Per-question answer scores of a result: EM and F1 of RE-RAG's answer and of the retriever-order one.
ANSWER_SCORES = ("em", "f1", "em_retriever_order", "f1_retriever_order")


def evaluation_metrics(recall_ks: list[int], eval_depths: list[int]) -> torch.nn.ModuleDict:
    """Per stage (val, test) and per depth (`<stage>_top<d>`): the means of `ANSWER_SCORES` and Recall@k
    of the RE's and the retriever's order, against has_answer and gold."""
    return torch.nn.ModuleDict(
        {
            key: MetricCollection(
                {
                    **{name: MeanMetric() for name in ANSWER_SCORES},
                    **{
                        f"{order}_{relevant}{n}": m
                        for order in ("re", "retriever")
                        for relevant in ("", "gold_")
                        for n, m in recall_at_k(recall_ks).items()
                    },
                },
                prefix=prefix,
                compute_groups=False,
            )  # each metric gets its own inputs
            for stage in ("val", "test")
            for key, prefix in ((stage, f"{stage}/"), *((f"{stage}_top{d}", f"{stage}/top{d}/") for d in eval_depths))
        }
    )


class Evaluator:
    """Reads batches with the module's RE and generator. `scoring`: the RE that scores while its
    weights stay fixed (`RelevanceEstimator.for_scoring`, set by the module for an evaluation epoch).
    `generated` (a prompt's tokens -> its answer and log-likelihood) is the answer cache: shared by the
    reads of one batch, and kept by the module from one validation to the next while the generator
    cannot change."""

    def __init__(self, estimator: RelevanceEstimator, generator: Generator, spec: EvaluationSpec):
        self.estimator, self.generator = estimator, generator
        self.score_batch_size, self.num_beams, self.eval_depths = (
            spec.score_batch_size,
            spec.num_beams,
            spec.eval_depths,
        )
        self.scoring: RelevanceEstimator | None = None
        self.generated: dict[tuple[int, ...], tuple[str, float]] = {}

    def relevance_scores(self, batch: dict) -> torch.Tensor:
        """The RE's log-odds s for every flattened (question, context) row, in length-sorted chunks;
        where the batch's RE rows are windows (`data.init_args.eval_context_words`), a context's s is
        its windows' pooled by `window_pooling`. A chunk holds one question's rows, which share
        their prompt's prefix."""
        re_inputs = batch["re"]
        counts = torch.as_tensor(batch["n_contexts"])
        question_of = torch.repeat_interleave(torch.arange(len(counts)), counts.cpu())
        if "re_window_of" in batch:
            question_of = question_of[batch["re_window_of"].cpu()]
        estimator = self.scoring or self.estimator
        s = estimator.score_rows(
            re_inputs["input_ids"], re_inputs["attention_mask"], self.score_batch_size, question_of
        )
        if "re_window_of" not in batch:
            return s
        return pool_windows(s, batch["re_window_of"], len(batch["retriever_scores"]), estimator.window_pooling)

    def answer(
        self, batch: dict, kept: list[torch.Tensor], weights: torch.Tensor, generated: dict | None = None
    ) -> list[tuple[str, float]]:
        """Generate from each kept context and marginalize with softmax(weights) (eq. 6).
        `generated` (a prompt's tokens -> its answer and log-likelihood) is shared by the calls over
        one batch (and kept longer by `keep_or_reset_answers`): a prompt the RE's and the retriever's
        top k both hold is generated once (greedy or beam search gives it one answer; batched apart,
        bf16 padding could give two)."""
        rows = torch.cat(kept)
        generated = {} if generated is None else generated
        prompts = self.generate_new(batch, rows, generated)
        answers = [generated[p][0] for p in prompts]
        loglik = torch.tensor([generated[p][1] for p in prompts], device=weights.device)
        out, start = [], 0
        for idx in kept:
            end = start + len(idx)
            out.append(marginalize_answers(answers[start:end], weights[idx], loglik[start:end]))
            start = end
        return out

    def generate_new(self, batch: dict, rows: torch.Tensor, generated: dict) -> list[tuple[int, ...]]:
        """Generate, in one call, an answer for each prompt of the flattened `rows` that `generated`
        (a prompt's tokens -> its answer and log-likelihood) lacks, and add it there. Returns the
        rows' prompts."""
        gen = batch["gen"]
        prompts = [
            tuple(ids[mask.bool()].tolist()) for ids, mask in zip(gen["input_ids"][rows], gen["attention_mask"][rows])
        ]
        new = {}  # each prompt not yet generated -> its first row
        for row, prompt in zip(rows.tolist(), prompts):
            if prompt not in generated:
                new.setdefault(prompt, row)
        if new:
            new_rows = torch.tensor(list(new.values()), device=rows.device)
            width = int(gen["attention_mask"][new_rows].sum(dim=1).max())
            texts, logliks = self.generator.generate(
                gen["input_ids"][new_rows, :width], gen["attention_mask"][new_rows, :width], self.num_beams
            )
            generated.update(zip(new, zip(texts, logliks.tolist())))
        return prompts

    def read(
        self,
        batch: dict,
        top_k: int,
        retriever_baseline: bool = False,
        s: torch.Tensor | None = None,
        generated: dict | None = None,
    ) -> tuple[torch.Tensor, list[dict]]:
        """The one pass over a batch: the RE's log-odds s of every flattened context (unless given),
        and one result per question, keyed by the record's id, with `index` (its dataset-wide
        position): the RE's top-k contexts, the eq. 6 answer over them, confidence = max_j RE_ij;
        with `retriever_baseline`, also `answer_retriever_order` from the retriever's top-k and scores.
        `generated`: the answers already generated for this batch's prompts (`answer`)."""
        generated = {} if generated is None else generated
        counts = batch["n_contexts"]
        s = self.relevance_scores(batch) if s is None else s
        kept = top_k_per_question(s, counts, top_k)
        flat = [c for cs in batch["contexts"] for c in cs]
        results = [
            {
                "id": qid,
                "index": int(index),
                "question": question,
                "answer": answer,
                "answer_logprob": logp,
                "confidence": torch.sigmoid(s[idx].max()).item(),
                "contexts": [{"id": flat[j]["id"], "re_score": s[j].item()} for j in idx.tolist()],
            }
            for qid, index, question, idx, (answer, logp) in zip(
                batch["ids"], batch["index"].tolist(), batch["questions"], kept, self.answer(batch, kept, s, generated)
            )
        ]
        if retriever_baseline:
            by_retriever = [rows.to(s.device) for rows in first_rows(counts, top_k)]
            by_retriever_answers = self.answer(batch, by_retriever, batch["retriever_scores"], generated)
            for result, (answer, _) in zip(results, by_retriever_answers):
                result["answer_retriever_order"] = answer
        return s, results

    def evaluate(
        self, batch: dict, stage: str, top_k: int, metrics: torch.nn.ModuleDict
    ) -> tuple[list[dict], list[tuple[dict, int]]]:
        """Metrics of one batch over its whole lists (`<stage>/...`) and over the retriever's first d
        contexts of each for every d of `eval_depths` (`<stage>/top<d>/...`: what reranking a
        shallower list gives, from the same RE scores), and per question (the results, whole lists
        only) what paired comparisons of runs need: EM and F1 of both answers, and the rank of
        the first relevant context in the RE's and the retriever's order (`first_hit`; Recall@k is
        rank <= k). Returns the results and what to log: (metrics, batch size) pairs."""
        generated = (
            self.generated
        )  # one generation per prompt across the reads below (`RERAGModule.keep_or_reset_answers`)
        s, counts = self.relevance_scores(batch), batch["n_contexts"]
        cuts = [(cut, rows.to(s.device)) for cut, rows in (first_contexts(batch, d) for d in self.eval_depths)]
        # Every prompt the reads below answer from, generated in one call: its decoding loop, which
        # costs a CPU about as much for one prompt as for a dozen, runs once per batch. The retriever's
        # first d contexts hold its top k where d >= k, and lie within them where d < k.
        wanted = [*top_k_per_question(s, counts, top_k), *first_rows(counts.to(s.device), top_k)]
        wanted += [rows[r] for cut, rows in cuts for r in top_k_per_question(s[rows], cut["n_contexts"], top_k)]
        self.generate_new(batch, torch.cat(wanted), generated)
        _, results = self.read(batch, top_k, retriever_baseline=True, s=s, generated=generated)
        score_results(batch, s, results)
        logged = [(metrics_of(metrics[stage], batch, s, results), len(batch["n_contexts"]))]
        for depth, (cut, rows) in zip(self.eval_depths, cuts):
            _, shallow = self.read(cut, top_k, retriever_baseline=True, s=s[rows], generated=generated)
            score_results(cut, s[rows], shallow)
            logged.append((metrics_of(metrics[f"{stage}_top{depth}"], cut, s[rows], shallow), len(cut["n_contexts"])))
        return results, logged


def score_results(batch: dict, s: torch.Tensor, results: list[dict]) -> list[dict]:
    """Add to each result EM and F1 of both answers and the rank of the first relevant context
    (`has_answer`, and `gold` where the data has it) in the RE's and the retriever's order."""
    counts = batch["n_contexts"].to(s.device)
    position = retriever_order(counts, s.device)
    relevance = relevant_flags(batch, s.device)
    for result, answers, rows in zip(results, batch["answers"], torch.split(torch.arange(len(s)), counts.tolist())):
        result |= {
            "em": exact_match(result["answer"], answers),
            "f1": token_f1(result["answer"], answers),
            "em_retriever_order": exact_match(result["answer_retriever_order"], answers),
            "f1_retriever_order": token_f1(result["answer_retriever_order"], answers),
            "first_hit": {
                order: {name: first_hit_rank(scores[rows], rel[rows]) for name, rel in relevance.items()}
                for order, scores in (("re", s), ("retriever", position))
            },
        }
    return results


def retriever_order(counts: torch.Tensor, device) -> torch.Tensor:
    """Scores that rank each question's contexts in the retriever's order (its first context highest)."""
    return -torch.cat([torch.arange(int(n), device=device) for n in counts]).float()


def relevant_flags(batch: dict, device) -> dict[str, torch.Tensor]:
    return {name: batch[name].to(device) for name in ("has_answer", "gold") if name in batch}


def metrics_of(metrics: MetricCollection, batch: dict, s: torch.Tensor, results: list[dict]) -> dict:
    """Update `metrics` with a scored batch; returns them by logged name."""
    counts = batch["n_contexts"].to(s.device)
    position, relevance = retriever_order(counts, s.device), relevant_flags(batch, s.device)
    # torchmetrics' retrieval metrics group rows by an integer: the question's dataset-wide index.
    indexes = torch.repeat_interleave(batch["index"].to(s.device), counts)
    logged = {}
    for name, metric in metrics.items(keep_base=True):
        if name in ANSWER_SCORES:
            metric.update(torch.tensor([r[name] for r in results], dtype=torch.float64))
        else:
            relevant = relevance.get("gold" if "_gold_" in name else "has_answer")
            if relevant is None:
                continue  # no gold flags in this data: gold recall is not logged
            metric.update(s if name.startswith("re_") else position, relevant, indexes=indexes)
        logged[f"{metrics.prefix}{name}"] = metric
    return logged
