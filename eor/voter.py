"""The EoR voter (section 4.1): weighted similarity (eq. 6), pooling (appendix C.4), retriever
weights with a threshold (section 4.2) and the argmax answer (eq. 7)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import torch

from eor.similarity import Similarity, similarity_tensor

POOLINGS = ("mean", "max", "majority", "plurality")


def pool(sim: torch.Tensor, active: torch.Tensor, pooling: str = "mean", vote_threshold: float = 0.5) -> torch.Tensor:
    """S_pool over the other active retrievers: [Q, R, R] similarities -> [Q, R] (appendix C.4).

    For candidate m the N scores are s_n = S_sim(y_m, y_n) for active n != m.
    mean: (1/N) sum s_n; max: max s_n (both 0 when N = 0);
    majority: I{ #{n: s_n > s} >= N/2 }, s = `vote_threshold`;
    plurality: I{ c_m = max_k c_k } with c_m = #{n: s_n > s}, the max over active k.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    num_retrievers = sim.shape[-1]
    others = active[None, :] & ~torch.eye(num_retrievers, dtype=torch.bool, device=sim.device)  # [R(m), R(n)]
    count = others.sum(-1).to(sim.dtype)  # N per candidate
    if pooling == "mean":
        return (sim * others).sum(-1) / count.clamp(min=1)
    if pooling == "max":
        return sim.masked_fill(~others, float("-inf")).amax(-1).where(count > 0, torch.zeros((), dtype=sim.dtype))
    votes = ((sim > vote_threshold) & others).sum(-1).to(sim.dtype)  # c_m
    if pooling == "majority":
        return (votes >= count / 2).to(sim.dtype)
    most = votes.masked_fill(~active, -1).amax(-1, keepdim=True)
    return (votes == most).to(sim.dtype)


def voter_scores(
    sim: torch.Tensor,
    metric_weights: torch.Tensor,
    retriever_weights: torch.Tensor,
    pooling: str = "mean",
    threshold: float = 0.1,
    vote_threshold: float = 0.5,
) -> torch.Tensor:
    """Voter scores s_m [Q, R] from cached similarities sim [Q, R, R, M].

    S_sim(y_m, y_n) = sum_k w^s_k sim_k(y_m, y_n) (eq. 6); retrievers with w^r_m <= t are left out
    of the pool (w^r_m I{w^r_m > t}, section 4.2): they neither vote nor win (score -inf);
    s_m = w^r_m S_pool({S_sim(y_m, y_n)}_{n != m}) (eq. 7).
    """
    weighted = sim @ metric_weights.to(sim.dtype)
    active = retriever_weights > threshold
    pooled = pool(weighted, active, pooling, vote_threshold)
    return (retriever_weights.to(sim.dtype) * pooled).masked_fill(~active, float("-inf"))


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
    def load(cls, path: str | Path) -> "VoterWeights":
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
            sim, metric_weights, retriever_weights, self.weights.pooling, self.weights.threshold, self.weights.vote_threshold
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

