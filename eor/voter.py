"""The EoR voter (section 4.1): weighted similarity (eq. 6), pooling (appendix C.4), retriever
weights with a threshold (section 4.2) and the argmax answer (eq. 7).

Voting (appendix C.4): the threshold s (`vote_threshold`) decides whether a pair of answers agrees:
y_n votes for y_m when S_sim(y_m, y_n) > s, S_sim being the pair's similarity of eq. 6 (the w^s-weighted
sum over metrics). Votes are counted, not weighted: c_m = #{n != m: S_sim(y_m, y_n) > s}. Majority
pooling is I{c_m >= N/2} with N = R - 1 (R retrievers, the paper's M); plurality pooling is
I{c_m = max_k c_k} over all R answers.
Retriever weights enter only through eq. 7, as the factor w^r_m on y_m's own pooled score.

Retriever exclusion (section 4.2): w^r_m is replaced by w^r_m I{w^r_m > t}. Only that factor of eq. 7
changes, so an excluded answer y_m still stays among the {y_n}_{n != m} that every other answer is
pooled over (N stays R - 1; it still votes and counts in the plurality's max). Its own score is -inf
rather than the literal 0, so that it is "directly ignored" as a candidate: with non-negative
similarities (EM, F1, BERTScore, NLI) this picks the same answer as the literal 0, because ties go to
the larger w^r (`select`), and a cosine similarity's negative scores cannot make it win.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from eor.similarity import Similarity, similarity_tensor

POOLINGS = ("mean", "max", "majority", "plurality")


def pool(sim: torch.Tensor, pooling: str = "mean", vote_threshold: float = 0.5) -> torch.Tensor:
    """S_pool over the other answers: [Q, R, R] similarities -> [Q, R] (appendix C.4).

    For candidate m the N = R - 1 scores are s_n = S_sim(y_m, y_n), n != m.
    mean: (1/N) sum s_n; max: max s_n (both 0 when N = 0);
    majority: I{ c_m >= N/2 } with c_m = #{n: s_n > s}, s = `vote_threshold`;
    plurality: I{ c_m = max_k c_k }, the max over all R answers.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    num_answers = sim.shape[-1]
    others = ~torch.eye(num_answers, dtype=torch.bool, device=sim.device)  # [R(m), R(n)]: n != m
    count = num_answers - 1  # N
    if pooling == "mean":
        return (sim * others).sum(-1) / max(count, 1)
    if pooling == "max":
        return sim.masked_fill(~others, float("-inf")).amax(-1) if count else torch.zeros_like(sim[..., 0])
    votes = ((sim > vote_threshold) & others).sum(-1)  # c_m: agreeing pairs
    if pooling == "majority":
        return (votes >= count / 2).to(sim.dtype)
    return (votes == votes.amax(-1, keepdim=True)).to(sim.dtype)


def voter_scores(
    sim: torch.Tensor,
    metric_weights: torch.Tensor,
    retriever_weights: torch.Tensor,
    pooling: str = "mean",
    threshold: float = 0.1,
    vote_threshold: float = 0.5,
) -> torch.Tensor:
    """Voter scores s_m [Q, R] from cached similarities sim [Q, R, R, M].

    S_sim(y_m, y_n) = sum_k w^s_k sim_k(y_m, y_n) (eq. 6);
    s_m = w^r_m S_pool({S_sim(y_m, y_n)}_{n != m}) (eq. 7), pooled over all other answers.
    A retriever with w^r_m <= t is excluded (w^r_m I{w^r_m > t}, section 4.2): its score is -inf,
    so it is never chosen over one above t, but its answer still counts in the others' pools.
    """
    weighted = sim @ metric_weights.to(sim.dtype)
    pooled = pool(weighted, pooling, vote_threshold)
    return (retriever_weights.to(sim.dtype) * pooled).masked_fill(retriever_weights <= threshold, float("-inf"))


def select(scores: torch.Tensor, retriever_weights: torch.Tensor) -> torch.Tensor:
    """m* = argmax_m s_m per question [Q] (eq. 7); ties go to the larger w^r, then the first.

    With no retriever above the threshold, the highest-weighted one answers.
    """
    best = scores.amax(-1, keepdim=True)
    tied = scores >= best - 1e-6 * best.abs().clamp(min=1)
    return torch.where(tied, retriever_weights.to(scores.dtype).expand_as(scores), float("-inf")).argmax(-1)


@dataclass
class VoterWeights:
    """The voter's parameters: w^s by metric name, w^r by retriever name, threshold t, pooling."""

    metrics: dict[str, float]
    retrievers: dict[str, float]
    threshold: float = 0.1
    pooling: str = "mean"
    vote_threshold: float = 0.5

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> VoterWeights:
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(w^s [M], w^r [R]) in the order of the dicts."""
        return torch.tensor(list(self.metrics.values())), torch.tensor(list(self.retrievers.values()))


class Voter:
    """EoR's answer selection with fixed metrics and weights."""

    def __init__(self, metrics: Sequence[Similarity], weights: VoterWeights):
        names = [m.name for m in metrics]
        if names != list(weights.metrics):
            raise ValueError(f"metrics {names} do not match the weights' metrics {list(weights.metrics)}")
        self.metrics, self.weights = list(metrics), weights

    def select(self, sim: torch.Tensor) -> torch.Tensor:
        """Chosen retriever index per question from cached similarities [Q, R, R, M] whose R axis
        follows `weights.retrievers`."""
        metric_weights, retriever_weights = self.weights.tensors()
        scores = voter_scores(
            sim,
            metric_weights,
            retriever_weights,
            self.weights.pooling,
            self.weights.threshold,
            self.weights.vote_threshold,
        )
        return select(scores, retriever_weights)

    def vote(self, answers: Mapping[str, Sequence[str]]) -> list[str]:
        """The EoR answer per question from each retriever's answers (by retriever name)."""
        missing = set(self.weights.retrievers) - set(answers)
        if missing:
            raise ValueError(f"no answers for retrievers {sorted(missing)}")
        rows = [answers[name] for name in self.weights.retrievers]
        chosen = self.select(similarity_tensor(rows, self.metrics))
        return [rows[m][q] for q, m in enumerate(chosen.tolist())]
