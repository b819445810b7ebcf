"""Ensemble by learning (section 4.2): Nelder-Mead over w^s and w^r maximizing training accuracy,
with a tie-break toward fewer retrievers above the filter threshold t.

The accuracy is piecewise constant in the weights: a retriever whose answer is never chosen leaves
it unchanged at any weight, so Nelder-Mead alone keeps the weight it started with (0.3, above
t = 0.1) and the learned weights cannot come out sparse as the paper's Figure 6 shows them
("EoR can effectively filter out redundant or unreliable retrievers", section 4.4). The search
therefore minimizes -accuracy plus a cost per retriever above t that is smaller than one training
question (so no accuracy is ever traded for sparsity), and then drops, one at a time, each
retriever whose exclusion costs no training question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize

from eor.voter import VoterWeights, select, voter_scores


@dataclass
class SearchConfig:
    """Weight-search settings; the defaults are the paper's (section 4.3) where it gives them.

    upper_bound: every weight lies in [0, upper_bound] (0.6 in the paper).
    threshold: t, retrievers with w^r <= t cannot be chosen; their answers still count in the
        others' pools (section 4.2, eq. 7; 0.1 in the paper).
    pooling, vote_threshold: the voter's pooling and its similarity threshold s (appendix C.4).
    restarts: extra Nelder-Mead runs from random points (the accuracy surface is piecewise constant).
    max_iter: Nelder-Mead iterations per run (None: SciPy's default, 200 x number of weights).
    seed: for the random restarts.
    """

    upper_bound: float = 0.6
    threshold: float = 0.1
    pooling: str = "mean"
    vote_threshold: float = 0.5
    restarts: int = 8
    max_iter: int | None = None
    seed: int = 0


def voter_accuracy(
    sim: torch.Tensor,
    correct: torch.Tensor,
    metric_weights: torch.Tensor,
    retriever_weights: torch.Tensor,
    pooling: str = "mean",
    threshold: float = 0.1,
    vote_threshold: float = 0.5,
) -> float:
    """(1/N) sum_i g(y_{m*_i}, a_i): the accuracy of the voter's choices, with sim [Q, R, R, M] and
    the correctness g of each retriever's answer as a boolean [R, Q] tensor."""
    chosen = select(
        voter_scores(sim, metric_weights, retriever_weights, pooling, threshold, vote_threshold), retriever_weights
    )
    return correct.T.gather(1, chosen[:, None]).float().mean().item()


def learn_weights(
    sim: torch.Tensor,
    correct: np.ndarray | torch.Tensor,
    metric_names: Sequence[str],
    retriever_names: Sequence[str],
    config: SearchConfig = SearchConfig(),
) -> tuple[VoterWeights, float]:
    """Solve max_{w^s, w^r} (1/N) sum_i g(y_{m*_i}, a_i) (section 4.2) with SciPy's Nelder-Mead,
    ties going to fewer retrievers above t.

    sim: the cached similarities [Q, R, R, M] of the training questions (`similarity_tensor`);
    correct: g(y_m^i, a_i) as a boolean [R, Q] array. Every objective evaluation is a tensor
    operation on `sim`. The objective is -accuracy + c * #{m: w^r_m > t} (none above t counts as
    R) with c = 1 / (Q (R + 1)), so R retrievers together cost less than one question: of two
    weightings it prefers the more accurate, and of two equally accurate ones the one that keeps
    fewer retrievers. The first run starts at the box centre with a simplex that drops one weight
    to 0 per vertex (so each retriever's exclusion is tried at once); `config.restarts` more runs
    start at random points. Each run's end point is pruned (`_drop_unneeded`). Returns the best
    weights and their training accuracy.
    """
    correct = torch.as_tensor(np.asarray(correct, dtype=bool))
    num_metrics, num_retrievers = len(metric_names), len(retriever_names)
    if sim.shape[1:] != (num_retrievers, num_retrievers, num_metrics) or correct.shape != (
        num_retrievers,
        sim.shape[0],
    ):
        raise ValueError(
            f"sim {tuple(sim.shape)} and correct {tuple(correct.shape)} do not match "
            f"{num_metrics} metrics and {num_retrievers} retrievers"
        )
    sim = sim.double()
    upper, threshold = config.upper_bound, config.threshold
    cost_per_retriever = 1.0 / (max(sim.shape[0], 1) * (num_retrievers + 1))

    def accuracy(x: np.ndarray) -> float:
        x = torch.as_tensor(np.clip(x, 0.0, upper))
        return voter_accuracy(
            sim, correct, x[:num_metrics], x[num_metrics:], config.pooling, threshold, config.vote_threshold
        )

    def kept(x: np.ndarray) -> int:
        """Retrievers above t; none counts as all: then no retriever is selected and the voter
        falls back to the highest weight (`select`), which is no sparser a choice."""
        return int((np.clip(x[num_metrics:], 0.0, upper) > threshold).sum()) or num_retrievers

    def objective(x: np.ndarray) -> float:
        return -accuracy(x) + cost_per_retriever * kept(x)

    rng = np.random.default_rng(config.seed)
    dim = num_metrics + num_retrievers
    starts = [np.full(dim, upper / 2), *rng.uniform(0.0, upper, size=(config.restarts, dim))]
    best_x, best_objective = None, np.inf
    for x0 in starts:
        simplex = np.repeat(x0[None], dim + 1, axis=0)
        for i in range(dim):  # vertex i moves weight i to the far side of the box
            simplex[i + 1, i] = 0.0 if x0[i] >= upper / 2 else upper
        result = minimize(
            objective,
            x0,
            method="Nelder-Mead",
            bounds=[(0.0, upper)] * dim,
            options={"initial_simplex": simplex, "maxiter": config.max_iter},
        )
        x = _drop_unneeded(np.clip(result.x, 0.0, upper), accuracy, num_metrics, threshold)
        if objective(x) < best_objective:
            best_x, best_objective = x, objective(x)
    weights = VoterWeights(
        metrics=dict(zip(metric_names, map(float, best_x[:num_metrics]))),
        retrievers=dict(zip(retriever_names, map(float, best_x[num_metrics:]))),
        threshold=threshold,
        pooling=config.pooling,
        vote_threshold=config.vote_threshold,
    )
    return weights, accuracy(best_x)


def _drop_unneeded(
    x: np.ndarray, accuracy: Callable[[np.ndarray], float], num_metrics: int, threshold: float
) -> np.ndarray:
    """The tie-break's last step: each retriever above t, lightest first, set to 0 (excluded,
    section 4.2) when that loses no training question; one retriever always stays. Nelder-Mead
    stops where the accuracy is flat, often with a useless retriever still above t; this reaches
    the sparse end of that flat region."""
    x, best = x.copy(), accuracy(x)
    above = [i for i in np.argsort(x[num_metrics:], kind="stable") if x[num_metrics + i] > threshold]
    for i in above[:-1]:
        trial = x.copy()
        trial[num_metrics + i] = 0.0
        trial_accuracy = accuracy(trial)
        if trial_accuracy >= best:
            x, best = trial, trial_accuracy
    return x
