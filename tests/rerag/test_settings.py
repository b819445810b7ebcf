"""rerag.settings: the module's typed setting groups checked before any model loads, each out-of-range or
unknown value refused naming `model.<group>.<field>`, and the groups checked against each other and the stages."""

import re

import pytest

from rerag.models.loading import ModelSpec
from rerag.settings import check_settings
from rerag.stages import JOINT, RE_ALONE
from rerag.teacher_cache import TeacherSpec
from tests.rerag.helpers import SPECS

MODELS = {"estimator": ModelSpec(config={"model_type": "t5"}), "generator": None}


def specs(**changed) -> dict:
    """The module's groups at their defaults (no teacher), with `changed` groups in their place."""
    return {name: cls() for name, cls in SPECS.items()} | {"teacher": None} | changed


#: (group, field, value, what the error says): a value out of range, each named `model.<group>.<field>`.
OUT_OF_RANGE = [
    ("inputs", "re_max_length", 0, "model.inputs.re_max_length: must be at least 1, got 0"),
    ("inputs", "generator_max_length", -1, "model.inputs.generator_max_length: must be at least 1, got -1"),
    ("inputs", "max_answer_length", 0, "model.inputs.max_answer_length: must be at least 1, got 0"),
    ("loss", "alpha_re", -1.0, "model.loss.alpha_re: must be at least 0, got -1.0"),
    ("loss", "alpha_tok", -0.5, "model.loss.alpha_tok: must be at least 0, got -0.5"),
    ("loss", "alpha_anchor", -1.0, "model.loss.alpha_anchor: must be at least 0, got -1.0"),
    ("loss", "teacher_temperature", 0.0, "model.loss.teacher_temperature: must be positive, got 0.0"),
    ("loss", "re_clamp", 0.0, "model.loss.re_clamp: must be in (0, 0.5) or null, got 0.0"),
    ("loss", "re_clamp", 0.5, "model.loss.re_clamp: must be in (0, 0.5) or null, got 0.5"),
    ("optimizer", "lr", -1e-4, "model.optimizer.lr: must be at least 0, got -0.0001"),
    ("optimizer", "warmup_steps", -1, "model.optimizer.warmup_steps: must be at least 0, got -1"),
    ("optimizer", "weight_decay", -1e-3, "model.optimizer.weight_decay: must be at least 0, got -0.001"),
    ("evaluation", "val_top_k", 0, "model.evaluation.val_top_k: must be at least 1, got 0"),
    ("evaluation", "test_top_k", 0, "model.evaluation.test_top_k: must be at least 1, got 0"),
    ("evaluation", "num_beams", 0, "model.evaluation.num_beams: must be at least 1, got 0"),
    ("evaluation", "score_batch_size", 0, "model.evaluation.score_batch_size: must be at least 1, got 0"),
]


@pytest.mark.parametrize("group, field, value, message", OUT_OF_RANGE, ids=lambda x: str(x))
def test_each_specs_check_refuses_a_value_out_of_range_naming_group_and_field(group, field, value, message):
    spec = SPECS[group](**{field: value})
    with pytest.raises(ValueError, match=re.escape(message)):
        spec.check()
    with pytest.raises(ValueError, match=re.escape(message)):
        check_settings(specs(**{group: spec}), JOINT, MODELS)


@pytest.mark.parametrize("group", list(SPECS))
def test_each_specs_defaults_pass(group):
    spec = SPECS[group]()
    if hasattr(spec, "check"):
        spec.check()
    check_settings(specs(), JOINT, MODELS)


@pytest.mark.parametrize(
    "group, field, value",
    [
        ("loss", "kl_direction", "forward"),
        ("loss", "gen_reduction", "Sum"),
        ("optimizer", "lr_schedule", "step"),
        ("evaluation", "window_pooling", "median"),
    ],
)
def test_a_value_outside_its_choices_is_refused_naming_group_and_field(group, field, value):
    with pytest.raises(ValueError, match=re.escape(f"model.{group}.{field} must be one of [")):
        check_settings(specs(**{group: SPECS[group](**{field: value})}), JOINT, MODELS)


def test_a_teacher_without_a_stage_that_learns_from_it_is_refused():
    teacher = TeacherSpec(cache_dir="cache")
    with pytest.raises(ValueError, match=r"model\.teacher: no stage learns from the teacher"):
        check_settings(specs(teacher=teacher), JOINT, MODELS)
    check_settings(specs(teacher=teacher), RE_ALONE, MODELS)


def test_a_teacher_question_template_holding_the_question_is_refused():
    teacher = TeacherSpec(cache_dir="cache", question_template="{question} {text}")
    with pytest.raises(ValueError, match=r"model\.teacher\.question_template: .* holds \{question\}"):
        teacher.check()
    with pytest.raises(ValueError, match=r"model\.teacher\.question_template: .* holds \{question\}"):
        check_settings(specs(teacher=teacher), RE_ALONE, MODELS)


def test_a_bad_teacher_model_is_named_within_its_group():
    teacher = TeacherSpec(cache_dir="cache", model=ModelSpec(config={"model_type": "t5"}, dtype="bfloat"))
    with pytest.raises(ValueError, match=r"model\.teacher\.model\.dtype: 'bfloat'"):
        check_settings(specs(teacher=teacher), RE_ALONE, MODELS)


def test_a_bad_model_spec_is_named_by_its_field():
    with pytest.raises(ValueError, match=r"model\.generator: needs exactly one of name_or_path and config"):
        check_settings(specs(), JOINT, MODELS | {"generator": ModelSpec()})


def test_the_stages_are_checked_with_the_groups():
    with pytest.raises(ValueError, match=r"model\.stages: at least one stage"):
        check_settings(specs(), [], MODELS)


def test_the_package_names_every_spec_a_python_caller_builds():
    import dataclasses

    import rerag

    specs = ("InputSpec", "LossSpec", "OptimizerSpec", "AssemblySpec", "TeacherSpec", "EvaluationSpec", "Stage")
    for name in (*specs, "ModelSpec", "LoraSpec", "RERAGModule", "RERAGDataModule"):
        assert name in rerag.__all__ and getattr(rerag, name).__name__ == name
    assert all(dataclasses.is_dataclass(getattr(rerag, name)) for name in specs)
