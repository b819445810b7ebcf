"""The optimizer of a fit: AdamW over the RE's and the generator's trainable parameters, each model
its own group and learning-rate factor by step (`rerag.stages.Plan.rate_factor`: 0 in the stages it
does not train), and gradient clipping per model."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal

import torch
from transformers import get_scheduler

from rerag.models.estimator import RelevanceEstimator
from rerag.stages import Plan


@dataclass(frozen=True)
class OptimizerSpec:
    """AdamW and its learning-rate schedule (`model.optimizer`; the paper: 1e-4, constant, weight decay 1e-3).

    Args:
        lr: AdamW's peak learning rate, the generator's where estimator_lr is set; at least 0.
        estimator_lr: the RE's own learning rate (None: lr).
        lr_schedule: constant (the paper), or linear or cosine decay to 0 (transformers' schedules), over
            the span each stage's `schedule` says.
        warmup_steps: optimizer steps of linear warm-up from 0 before the schedule (0: none).
        weight_decay: AdamW weight decay; at least 0.
        clip_per_model: clip the RE's and the generator's gradient norms each on its own to
            trainer.gradient_clip_val (`clip_each_model`), instead of one norm over both.
    """

    lr: float = 1e-4
    estimator_lr: float | None = None
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0
    weight_decay: float = 1e-3
    clip_per_model: bool = False

    def check(self) -> None:
        """A setting out of its range, named (`model.optimizer.<field>`)."""
        for field in ("lr", "warmup_steps", "weight_decay"):
            if getattr(self, field) < 0:
                raise ValueError(f"model.optimizer.{field}: must be at least 0, got {getattr(self, field)}")


torch.serialization.add_safe_globals([OptimizerSpec])  # checkpoints' hyperparameters hold it

#: `lr_schedule` -> the transformers schedule it runs (a constant rate still warms up when warmup_steps > 0).
LR_SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}


def schedule_factor(lr_schedule: str, warmup_steps: int, steps: int):
    """transformers' `lr_schedule` with `warmup_steps` over `steps` optimizer steps, as the
    step -> learning-rate factor that torch's LambdaLR takes (read off a one-parameter probe)."""
    probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    name = LR_SCHEDULES[lr_schedule]
    return get_scheduler(name, probe, num_warmup_steps=warmup_steps, num_training_steps=steps).lr_lambdas[0]


def estimator_parameters(estimator: RelevanceEstimator) -> list[torch.nn.Parameter]:
    """The trainable parameters of the RE: its own model's, or its adapter's on a shared base."""
    adapter = estimator.adapter
    return [
        p
        for name, p in estimator.model.named_parameters()
        if p.requires_grad and (adapter is None or f".{adapter}." in name)
    ]


def parameters_by_model(
    module: torch.nn.Module, estimator: RelevanceEstimator
) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    """The trainable parameters of the RE, then the rest of `module`'s: the generator's (on a shared
    base: each adapter's)."""
    re_params = estimator_parameters(estimator)
    ids = {id(p) for p in re_params}
    return re_params, [p for p in module.parameters() if p.requires_grad and id(p) not in ids]


def optimizer_and_schedule(
    parameters: tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]], plan: Plan, spec: OptimizerSpec
) -> dict:
    """AdamW with a group per model (the RE's at `spec.estimator_lr`, None: `spec.lr`; the generator's at
    `spec.lr`) and a LambdaLR stepping each group's rate by its model's stages, in Lightning's
    `configure_optimizers` form. The paper's setup is AdamW at a constant rate with weight decay 1e-3."""
    re_params, generator_params = parameters
    groups = {
        "estimator": {"params": re_params, "lr": spec.lr if spec.estimator_lr is None else spec.estimator_lr},
        "generator": {"params": generator_params},
    }
    groups = {name: group | {"name": name} for name, group in groups.items() if group["params"]}
    optimizer = torch.optim.AdamW(list(groups.values()), lr=spec.lr, weight_decay=spec.weight_decay)
    factor_over = partial(schedule_factor, spec.lr_schedule, spec.warmup_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, [plan.rate_factor(name, factor_over) for name in groups])
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def clip_each_model(parameters: tuple[list[torch.nn.Parameter], ...], max_norm: float) -> None:
    """Clip each model's gradient norm on its own: one global norm lets a large gradient of one
    model shrink the other's step."""
    for params in parameters:
        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], max_norm)
