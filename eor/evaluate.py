"""The EoR evaluation loop: run the pool, learn (or load) the voter's weights, report EM/F1 and
MRLR before and after adding EoR (table 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from eor.analysis import ERRORS, error_decomposition, mrlr, oracle_upper_bound, rwr_matrix
from eor.learning import SearchConfig, learn_weights
from eor.plots import plot_boxplot, plot_heatmap
from eor.reader import Reader, read_pool
from eor.retrievers.base import Retriever
from eor.similarity import Similarity, build_metric, similarity_tensor
from eor.voter import Voter, VoterWeights
from erag.answers import exact_match, has_answer, token_f1


@dataclass
class EoRConfig:
    """Settings of `evaluate_eor`.

    metrics: similarity metrics of eq. 6 as specs: "em", "f1", "bertscore:PATH",
        "embedding:PATH" (sentence-transformers or HF encoder) or "nli:PATH".
    train_fraction: share of the questions used to learn the weights; the rest is the test split.
    seed: seed of the train/test shuffle.
    weights: a weights JSON saved by an earlier run; when set, nothing is learned and every
        question is a test question.
    save_weights: where to write the learned weights (JSON), if anywhere.
    batch_size: questions per reader call.
    plots_dir: where to write rwr_heatmap.png, upper_bound.png and error_rwr_<error>.png, if anywhere.
    search: the Nelder-Mead weight search (paper defaults: bound 0.6, threshold 0.1, mean pooling).
    correctness: when an answer counts as right for the weight search, MRLR, RWR, the oracle
        bound and the error types: "em" (exact match with a gold answer) or "contains" (a gold
        answer occurs in it, DPR's token match: for an LLM's sentence-long answers, where the
        paper used BEM, a learned answer-equivalence model).
    """

    metrics: list[str] = field(default_factory=lambda: ["em", "f1"])
    train_fraction: float = 0.5
    seed: int = 0
    weights: str | None = None
    save_weights: str | None = None
    batch_size: int = 16
    plots_dir: str | None = None
    search: SearchConfig = field(default_factory=SearchConfig)
    correctness: Literal["em", "contains"] = "em"

    def __post_init__(self):
        if self.correctness not in ("em", "contains"):
            raise ValueError(f"correctness must be 'em' or 'contains', got {self.correctness!r}")


@dataclass
class EoRReport:
    """Test-split results. retriever_em/f1/accuracy and mrlr_* are keyed by retriever name;
    mrlr_with_eor adds the key "EoR". Scores are percentages, MRLR values fractions. accuracy: the
    share answered right by the config's `correctness`. error_rates: per error type of appendix B,
    the share of the kept test questions on which each retriever's RALM makes it. Per test question,
    for paired comparisons: test_em (each retriever's and "EoR"'s EM, 0/1), test_f1 (token F1, 0-1)
    and test_correct (right by `correctness`); train_em, the same EM on the questions the weights
    were learned on (empty when they were loaded), for the drift from the search split to the test
    split (the paper's Table 2). rwr: eq. 1 between the retrievers and EoR (rows and columns in
    test_em's order); error_rwr: per error type, eq. 1 between the retrievers (-1 where undefined); upper_bound: the
    oracle's mean accuracy (%) by pool size."""

    retriever_em: dict[str, float]
    retriever_f1: dict[str, float]
    eor_em: float
    eor_f1: float
    mrlr_pool: dict[str, float]
    mrlr_with_eor: dict[str, float]
    weights: VoterWeights
    train_accuracy: float | None
    num_train: int
    num_test: int
    error_rates: dict[str, dict[str, float]] = field(default_factory=dict)
    retriever_accuracy: dict[str, float] = field(default_factory=dict)
    eor_accuracy: float | None = None
    test_em: dict[str, list[float]] = field(default_factory=dict)
    test_f1: dict[str, list[float]] = field(default_factory=dict)
    train_em: dict[str, list[float]] = field(default_factory=dict)
    test_correct: dict[str, list[bool]] = field(default_factory=dict)
    rwr: list[list[float]] = field(default_factory=list)
    error_rwr: dict[str, list[list[float]]] = field(default_factory=dict)
    upper_bound: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def table(self) -> str:
        """A markdown table: one row per retriever and one for EoR."""
        lines = [
            "| retriever | EM | F1 | accuracy | MRLR (pool) | MRLR (pool + EoR) | w^r |",
            "|---|---|---|---|---|---|---|",
        ]
        for name in self.retriever_em:
            lines.append(
                f"| {name} | {self.retriever_em[name]:.2f} | {self.retriever_f1[name]:.2f} | "
                f"{self.retriever_accuracy[name]:.2f} | {self.mrlr_pool[name]:.4f} | {self.mrlr_with_eor[name]:.4f} | "
                f"{self.weights.retrievers[name]:.3f} |"
            )
        lines.append(
            f"| EoR | {self.eor_em:.2f} | {self.eor_f1:.2f} | {self.eor_accuracy:.2f} | | "
            f"{self.mrlr_with_eor['EoR']:.4f} | |"
        )
        return "\n".join(lines)


def evaluate_eor(
    questions: Sequence[str],
    gold_answers: Sequence[Sequence[str]],
    retrievers: Sequence[Retriever],
    reader: Reader,
    config: EoRConfig = EoRConfig(),
    metrics: Sequence[Similarity] | None = None,
    test_indices: Sequence[int] | None = None,
) -> EoRReport:
    """Answer every question with every retriever, learn EoR's weights on the train split (or load
    them), and score each retriever and EoR on the test split. `metrics` overrides `config.metrics`
    with metric objects. `test_indices` fixes the test split (the paper's protocol: weights chosen
    on a validation split, reported on a separate test split), the other questions learn; without
    it, `config.train_fraction` of a seeded shuffle learns. Correctness is `config.correctness`."""
    if len(questions) != len(gold_answers):
        raise ValueError(f"{len(questions)} questions but {len(gold_answers)} gold answer lists")
    pool = read_pool(retrievers, reader, questions, config.batch_size)
    metrics = list(metrics) if metrics is not None else [build_metric(spec) for spec in config.metrics]
    em = np.array([[exact_match(a, gold) for a, gold in zip(row, gold_answers)] for row in pool.answers])
    f1 = np.array([[token_f1(a, gold) for a, gold in zip(row, gold_answers)] for row in pool.answers])
    right = (
        em > 0
        if config.correctness == "em"
        else np.array([[has_answer(a, gold) for a, gold in zip(row, gold_answers)] for row in pool.answers])
    )
    sim = similarity_tensor(pool.answers, metrics)

    order = np.random.default_rng(config.seed).permutation(len(questions))
    if test_indices is not None:  # the train split first, then the fixed test split
        fixed = set(test_indices)
        order = np.array([i for i in range(len(questions)) if i not in fixed] + sorted(fixed), dtype=int)
    if config.weights:
        weights, train_accuracy, train, test = VoterWeights.load(config.weights), None, order[:0], np.sort(order)
        if list(weights.retrievers) != pool.names:
            raise ValueError(f"weights are for retrievers {list(weights.retrievers)}, the pool is {pool.names}")
    else:
        num_train = (
            len(questions) - len(set(test_indices))
            if test_indices is not None
            else round(config.train_fraction * len(questions))
        )
        train, test = np.sort(order[:num_train]), np.sort(order[num_train:])
        if not len(train) or not len(test):
            raise ValueError(
                f"train_fraction {config.train_fraction} leaves an empty split of {len(questions)} questions"
            )
        weights, train_accuracy = learn_weights(
            sim[torch.as_tensor(train)], right[:, train], [m.name for m in metrics], pool.names, config.search
        )
        if config.save_weights:
            weights.save(config.save_weights)

    voter = Voter(metrics, weights)
    chosen = voter.select(sim[torch.as_tensor(test)]).numpy()
    train_em = {}
    if len(train):  # each retriever's and EoR's EM on the search split, for the train-to-test drift
        train_chosen = voter.select(sim[torch.as_tensor(train)]).numpy()
        train_rows = np.vstack([em[:, train], em[train_chosen, train][None]])
        train_em = {name: row.tolist() for name, row in zip([*pool.names, "EoR"], train_rows)}
    eor_em, eor_f1 = em[chosen, test], f1[chosen, test]
    correct = right[:, test]
    with_eor = np.vstack([correct, right[chosen, test][None]])
    errors = error_decomposition(
        [[row[n] for n in test] for row in pool.answers],
        [["\n".join(pool.contexts[r][n]) for n in test] for r in range(len(pool.names))],
        [gold_answers[n] for n in test],
        correct=correct,
    )
    upper_bound = oracle_upper_bound(correct, max_combinations=500, seed=config.seed)
    if config.plots_dir:
        plot_heatmap(
            rwr_matrix(with_eor), [*pool.names, "EoR"], Path(config.plots_dir) / "rwr_heatmap.png", "RWR (eq. 1)"
        )
        for error in ERRORS:  # figure 4
            plot_heatmap(
                errors.rwr[error],
                pool.names,
                Path(config.plots_dir) / f"error_rwr_{error}.png",
                f"RWR of {error.replace('_', ' ')} errors (-1: undefined)",
            )
        plot_boxplot(
            {str(k): 100 * v for k, v in upper_bound.items()},
            Path(config.plots_dir) / "upper_bound.png",
            "Oracle upper bound by pool size",
            "EM (%)",
            reference=100 * correct.mean(1).max(),
        )
    return EoRReport(
        retriever_em=dict(zip(pool.names, (100 * em[:, test].mean(1)).tolist())),
        retriever_f1=dict(zip(pool.names, (100 * f1[:, test].mean(1)).tolist())),
        eor_em=float(100 * eor_em.mean()),
        eor_f1=float(100 * eor_f1.mean()),
        mrlr_pool=dict(zip(pool.names, mrlr(correct).tolist())),
        mrlr_with_eor=dict(zip([*pool.names, "EoR"], mrlr(with_eor).tolist())),
        weights=weights,
        train_accuracy=train_accuracy,
        num_train=len(train),
        num_test=len(test),
        error_rates={e: dict(zip(pool.names, (100 * errors.rates[e]).tolist())) for e in ERRORS},
        retriever_accuracy=dict(zip(pool.names, (100 * correct.mean(1)).tolist())),
        eor_accuracy=float(100 * with_eor[-1].mean()),
        test_em={name: row.tolist() for name, row in zip([*pool.names, "EoR"], np.vstack([em[:, test], eor_em[None]]))},
        test_f1={name: row.tolist() for name, row in zip([*pool.names, "EoR"], np.vstack([f1[:, test], eor_f1[None]]))},
        train_em=train_em,
        test_correct={name: row.tolist() for name, row in zip([*pool.names, "EoR"], with_eor)},
        rwr=rwr_matrix(with_eor).tolist(),
        error_rwr={e: np.asarray(errors.rwr[e]).tolist() for e in ERRORS},
        upper_bound={str(k): float(100 * v.mean()) for k, v in upper_bound.items()},
    )
