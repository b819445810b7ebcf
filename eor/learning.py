"""Ensemble by learning (section 4.2): Nelder-Mead over w^s and w^r maximizing training accuracy."""

from __future__ import annotations

from collections.abc import Sequence
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
    """Solve max_{w^s, w^r} (1/N) sum_i g(y_{m*_i}, a_i) (section 4.2) with SciPy's Nelder-Mead.

    sim: the cached similarities [Q, R, R, M] of the training questions (`similarity_tensor`);
    correct: g(y_m^i, a_i) as a boolean [R, Q] array. Every objective evaluation is a tensor
    operation on `sim`. The first run starts at the box centre with a simplex that drops one
    weight to 0 per vertex; `config.restarts` more runs start at random points. Returns the best
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
    upper = config.upper_bound

    def accuracy(x: np.ndarray) -> float:
        x = torch.as_tensor(np.clip(x, 0.0, upper))
        return voter_accuracy(
            sim, correct, x[:num_metrics], x[num_metrics:], config.pooling, config.threshold, config.vote_threshold
        )

    rng = np.random.default_rng(config.seed)
    dim = num_metrics + num_retrievers
    starts = [np.full(dim, upper / 2), *rng.uniform(0.0, upper, size=(config.restarts, dim))]
    best_x, best_accuracy = None, -1.0
    for x0 in starts:
        simplex = np.repeat(x0[None], dim + 1, axis=0)
        for i in range(dim):  # vertex i moves weight i to the far side of the box
            simplex[i + 1, i] = 0.0 if x0[i] >= upper / 2 else upper
        result = minimize(
            lambda x: -accuracy(x),
            x0,
            method="Nelder-Mead",
            bounds=[(0.0, upper)] * dim,
            options={"initial_simplex": simplex, "maxiter": config.max_iter},
        )
        x = np.clip(result.x, 0.0, upper)
        if -result.fun > best_accuracy:
            best_x, best_accuracy = x, -result.fun
    weights = VoterWeights(
        metrics=dict(zip(metric_names, map(float, best_x[:num_metrics]))),
        retrievers=dict(zip(retriever_names, map(float, best_x[num_metrics:]))),
        threshold=config.threshold,
        pooling=config.pooling,
        vote_threshold=config.vote_threshold,
    )
    return weights, float(best_accuracy)
