"""The optimizer of a fit: AdamW over the RE's and the generator's trainable parameters, each model
its own group and learning-rate factor by step (`rerag.stages.Plan.rate_factor`: 0 in the stages it
does not train), and gradient clipping per model."""

from __future__ import annotations

from functools import partial

import torch
from transformers import get_scheduler

from rerag.models.estimator import RelevanceEstimator
from rerag.stages import Plan

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
    parameters: tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]],
    plan: Plan,
    *,
    lr: float,
    estimator_lr: float | None,
    weight_decay: float,
    lr_schedule: str,
    warmup_steps: int,
) -> dict:
    """AdamW with a group per model (the RE's at `estimator_lr`, None: `lr`; the generator's at `lr`)
    and a LambdaLR stepping each group's rate by its model's stages, in Lightning's
    `configure_optimizers` form. The paper's setup is AdamW at a constant rate with weight decay 1e-3."""
    re_params, generator_params = parameters
    groups = {
        "estimator": {"params": re_params, "lr": lr if estimator_lr is None else estimator_lr},
        "generator": {"params": generator_params},
    }
    groups = {name: group | {"name": name} for name, group in groups.items() if group["params"]}
    optimizer = torch.optim.AdamW(list(groups.values()), lr=lr, weight_decay=weight_decay)
    factor_over = partial(schedule_factor, lr_schedule, warmup_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, [plan.rate_factor(name, factor_over) for name in groups])
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def clip_each_model(parameters: tuple[list[torch.nn.Parameter], ...], max_norm: float) -> None:
    """Clip each model's gradient norm on its own: one global norm lets a large gradient of one
    model shrink the other's step."""
    for params in parameters:
        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], max_norm)
