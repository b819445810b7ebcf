"""The training method as a list of stages: what trains, for how many optimizer steps, against what.

The paper's joint training (RE-RAG 2.3, eq. 12) is one stage, `Stage()`: both models train, the RE
against the live generator's F_ij. Its baselines and the shipped real-LM configs are lists:

- the RE alone against a frozen teacher: `[Stage(train="estimator", re_learns_from="teacher")]`
- RAG without the RE (Table 6's baseline): `[Stage(train="generator", marginalize_with="retriever")]`
- the pointwise MonoT5 baseline (Tables 2-3): `[Stage(train="estimator", re_learns_from="labels")]`
- a frozen-teacher stage before joint training: `[Stage(steps=280, train="estimator",
  re_learns_from="teacher"), Stage()]`
- the generator first, then the RE against the frozen teacher: `[Stage(steps=80, train="generator",
  marginalize_with="retriever"), Stage(train="estimator", re_learns_from="teacher")]`

`check_stages` refuses a combination the method does not define, naming the stage and the field.
`Plan` places the stages on a fit's optimizer steps and gives each model's learning-rate factor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Literal, get_args, get_type_hints

import torch

#: The two models a stage may train.
MODELS = ("estimator", "generator")


@dataclass(frozen=True)
class Stage:
    """One stage of a fit.

    Args:
        steps: optimizer steps this stage runs; None (the last stage's, and only its): until the fit ends.
        train: the models that train: both (eq. 12), estimator (the RE alone) or generator (the generator alone).
        re_learns_from: what the RE's losses (eq. 7-11) read F_ij from: generator (the live generator, eq. 8),
            teacher (the frozen teacher: the generator as the fit began, or model.teacher.model; read from
            the teacher cache with model.teacher), or labels (each context's has_answer, the pointwise
            MonoT5 baseline; the generator never runs).
        marginalize_with: what L_gen (eq. 7) weights contexts with: re (the RE's softmax) or retriever
            (softmax of the retriever's scores: RAG without the RE, Table 6's baseline; the RE never runs).
        schedule: run (a model's warm-up and decay span its training steps, from its first to its last, across
            stages) or stage (they restart within this stage).
    """

    steps: int | None = None
    train: Literal["both", "estimator", "generator"] = "both"
    re_learns_from: Literal["generator", "teacher", "labels"] = "generator"
    marginalize_with: Literal["re", "retriever"] = "re"
    schedule: Literal["run", "stage"] = "run"

    @property
    def models(self) -> tuple[str, ...]:
        """The models this stage trains."""
        return MODELS if self.train == "both" else (self.train,)


torch.serialization.add_safe_globals([Stage])  # a checkpoint's hyperparameters hold the stages

#: The paper's joint training (eq. 12), and its baselines as one-stage lists.
JOINT = [Stage()]
RE_ALONE = [Stage(train="estimator", re_learns_from="teacher")]  # the RE against a frozen teacher
RETRIEVER_MARGINALIZED = [Stage(train="generator", marginalize_with="retriever")]  # RAG without the RE (Table 6)
POINTWISE = [Stage(train="estimator", re_learns_from="labels")]  # MonoT5-style, on has_answer (Tables 2-3)


def check_stages(stages: list[Stage]) -> None:
    """Refuse a list the method does not define, naming the stage (`model.stages[i]`) and its field."""
    if not stages:
        raise ValueError("model.stages: at least one stage is needed (the paper's joint training is [{}])")
    for i, stage in enumerate(stages):
        name = f"model.stages[{i}]"
        for field in fields(Stage):  # the CLI checks these; a Python caller too
            allowed = get_args(get_type_hints(Stage)[field.name])
            if field.name != "steps" and getattr(stage, field.name) not in allowed:
                raise ValueError(
                    f"{name}.{field.name}: must be one of {list(allowed)}, got {getattr(stage, field.name)!r}"
                )
        if (stage.steps is None) != (i == len(stages) - 1):
            raise ValueError(
                f"{name}.steps: {stage.steps}; every stage but the last runs a number of steps, and the last "
                "runs until the fit ends (null: trainer.max_steps sets the fit's length)"
            )
        if stage.steps is not None and stage.steps < 1:
            raise ValueError(f"{name}.steps: must be at least 1 or null, got {stage.steps}")
        if stage.train == "both" and stage.re_learns_from != "generator":
            raise ValueError(
                f"{name}.re_learns_from: {stage.re_learns_from} with train: both; the RE learns from the "
                "generator that trains beside it (re_learns_from: generator), or trains alone (train: estimator)"
            )
        if stage.train == "estimator" and stage.re_learns_from == "generator":
            raise ValueError(
                f"{name}.re_learns_from: generator with train: estimator; a generator that does not train is "
                "the frozen teacher (re_learns_from: teacher)"
            )
        if stage.train == "generator" and stage.re_learns_from != "generator":
            raise ValueError(f"{name}.re_learns_from: the RE does not train in a train: generator stage")
        if (stage.train == "generator") != (stage.marginalize_with == "retriever"):
            raise ValueError(
                f"{name}.marginalize_with: {stage.marginalize_with} with train: {stage.train}; the generator "
                "alone marginalizes with the retriever, and a stage that trains the RE with the RE"
            )
        if stage.re_learns_from == "labels" and stage.marginalize_with != "re":
            raise ValueError(f"{name}.marginalize_with: a labels stage runs no generator")


class Plan:
    """The stages of one fit placed on its optimizer steps (`total`: the fit's last step)."""

    def __init__(self, stages: list[Stage], total: int | float = float("inf")):
        self.stages = stages
        self.starts = [0]
        for stage in stages[:-1]:
            self.starts.append(self.starts[-1] + stage.steps)
        self.ends = self.starts[1:] + [total]

    def index(self, step: int) -> int:
        """The stage optimizer step `step` belongs to (steps past the last stage's end: the last)."""
        for i, end in enumerate(self.ends):
            if step < end:
                return i
        return len(self.stages) - 1

    def last_training_end(self, model: str) -> int:
        """The step after `model`'s last training step (0: it never trains)."""
        return max((end for stage, end in zip(self.stages, self.ends) if model in stage.models), default=0)

    def boundaries(self) -> list[int]:
        """The steps at which a stage after the first begins."""
        return self.starts[1:]

    def _spans(self, model: str) -> tuple[list[int], list[int]]:
        """The stages `model` trains in, and those of them with `schedule: run`."""
        trained = [i for i, s in enumerate(self.stages) if model in s.models]
        return trained, [i for i in trained if self.stages[i].schedule == "run"]

    def schedule_starts(self) -> list[int]:
        """The steps at which a model's learning-rate schedule (and its warm-up) begins."""
        starts = set()
        for model in MODELS:
            trained, run = self._spans(model)
            starts |= {self.starts[i] for i in trained if i not in run} | ({self.starts[run[0]]} if run else set())
        return sorted(starts)

    def rate_factor(self, model: str, factor_over: Callable[[int], Callable[[int], float]]) -> Callable[[int], float]:
        """`model`'s learning-rate factor by optimizer step, as torch's LambdaLR takes it: 0 in the stages
        it does not train; in a `schedule: stage` stage `factor_over(stage length)` from the stage's
        start; in `schedule: run` stages `factor_over(span)` from the first to the last step the model
        trains in such stages."""
        trained, run = self._spans(model)
        span = (self.starts[run[0]], self.ends[run[-1]]) if run else (0, 0)
        run_factor = factor_over(int(span[1] - span[0])) if run else None
        own = {i: factor_over(int(self.ends[i] - self.starts[i])) for i in trained if i not in run}

        def factor(step: int) -> float:  # a function: LambdaLR leaves it out of its state_dict
            i = self.index(step)
            if i not in trained:
                return 0.0
            if i in own:
                return own[i](step - self.starts[i])
            return run_factor(step - span[0])

        return factor
