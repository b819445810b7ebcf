"""The RE-RAG module's settings checked before any model loads: each spec against its ranges and
choices, and the specs against each other, an error naming the field (`model.<group>.<field>`)."""

from __future__ import annotations

import dataclasses
from typing import Literal, get_args, get_origin, get_type_hints

from rerag.stages import Stage, check_stages


def check_choices(spec, group: str) -> None:
    """Refuse a `Literal` field of the dataclass `spec` outside its choices (the CLI checks them; a
    Python caller is checked here), naming `model.<group>.<field>`."""
    hints = get_type_hints(type(spec))
    for field in dataclasses.fields(spec):
        allowed = get_args(hints[field.name])
        value = getattr(spec, field.name)
        if get_origin(hints[field.name]) is Literal and value not in allowed:
            raise ValueError(f"model.{group}.{field.name} must be one of {list(allowed)}, got {value!r}")


def check_settings(specs: dict, stages: list[Stage], models: dict) -> None:
    """Refuse a module setting out of its range or one that contradicts another, naming it; `specs`
    are the module's typed groups by field (`loss`, `optimizer` ...; None where unset), `models` its
    `ModelSpec`s by field."""
    for group, spec in specs.items():
        if spec is None:
            continue
        check_choices(spec, group)
        if hasattr(spec, "check"):
            spec.check()
    for field, spec in models.items():
        if spec is not None:
            spec.check(f"model.{field}")
    check_stages(stages)
    if specs["teacher"] is not None and not any(stage.re_learns_from == "teacher" for stage in stages):
        raise ValueError(
            "model.teacher: no stage learns from the teacher (re_learns_from: teacher); a trained generator's F "
            "changes, so its scores cannot be cached"
        )
