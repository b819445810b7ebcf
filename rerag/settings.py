"""The RE-RAG module's settings checked before any model loads: each against its range, and against
each other, an error naming the field (`model.<field>`)."""

from __future__ import annotations

from typing import Literal, get_args, get_origin

from rerag.stages import Stage, check_stages


def check_settings(hp, stages: list[Stage], hints: dict, specs: dict) -> None:
    """Refuse a module setting out of its range or one that contradicts another, naming it; `hints`
    are the module's argument types (the CLI checks Literals; a Python caller is checked here), `specs`
    its `ModelSpec`s by field."""
    for field, minimum in (
        ("val_top_k", 1),
        ("test_top_k", 1),
        ("num_beams", 1),
        ("score_batch_size", 1),
        ("max_answer_length", 1),
        ("alpha_re", 0),
        ("alpha_tok", 0),
        ("alpha_anchor", 0),
        ("warmup_steps", 0),
        ("lr", 0),
        ("weight_decay", 0),
    ):
        if hp[field] < minimum:
            raise ValueError(f"model.{field}: must be at least {minimum}, got {hp[field]}")
    if not hp.teacher_temperature > 0:
        raise ValueError(f"model.teacher_temperature: must be positive, got {hp.teacher_temperature}")
    if hp.re_clamp is not None and not 0 < hp.re_clamp < 0.5:
        raise ValueError(f"model.re_clamp: must be in (0, 0.5) or null, got {hp.re_clamp}")
    for field, hint in hints.items():  # the CLI checks Literals; Python callers too
        allowed = get_args(hint)
        if get_origin(hint) is Literal and hp[field] not in allowed:
            raise ValueError(f"model.{field} must be one of {list(allowed)}, got {hp[field]!r}")
    for field, spec in specs.items():
        if spec is not None:
            spec.check(f"model.{field}")
    check_stages(stages)
    if hp.teacher_cache_dir is None and hp.teacher is not None:
        raise ValueError("model.teacher needs model.teacher_cache_dir: a teacher is only read through its cache")
    if hp.teacher_cache_dir is not None and not any(stage.re_learns_from == "teacher" for stage in stages):
        raise ValueError(
            "model.teacher_cache_dir: no stage learns from the teacher (re_learns_from: teacher); a trained "
            "generator's F changes"
        )
    if hp.teacher_question_template is not None and hp.teacher_cache_dir is None:
        raise ValueError(
            "model.teacher_question_template is scored once into the teacher cache: it needs teacher_cache_dir "
            "(and a stage with re_learns_from: teacher)"
        )
    if hp.teacher_question_template is not None and "{question}" in hp.teacher_question_template:
        raise ValueError(
            f"model.teacher_question_template: {hp.teacher_question_template!r} holds {{question}}: the teacher "
            "reads the passage alone and then scores the question"
        )
