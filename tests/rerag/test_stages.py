import pytest

from rerag.stages import JOINT, POINTWISE, RE_ALONE, RETRIEVER_MARGINALIZED, Plan, Stage, check_stages

TEACHER_THEN_JOINT = [Stage(steps=3, train="estimator", re_learns_from="teacher"), Stage()]
GENERATOR_THEN_RE = [Stage(steps=2, train="generator", marginalize_with="retriever"), *RE_ALONE]


@pytest.mark.parametrize("stages", [JOINT, RE_ALONE, RETRIEVER_MARGINALIZED, POINTWISE, TEACHER_THEN_JOINT])
def test_the_methods_stage_lists_pass(stages):
    check_stages(stages)


@pytest.mark.parametrize(
    "stages, message",
    [
        ([], r"model\.stages: at least one stage"),
        ([Stage(), Stage()], r"model\.stages\[0\]\.steps: None; every stage but the last runs"),
        ([Stage(steps=5)], r"model\.stages\[0\]\.steps: 5; .* the last runs until the fit ends"),
        ([Stage(steps=0), Stage()], r"model\.stages\[0\]\.steps: must be at least 1"),
        ([Stage(re_learns_from="teacher")], r"model\.stages\[0\]\.re_learns_from: teacher with train: both"),
        ([Stage(train="estimator")], r"model\.stages\[0\]\.re_learns_from: generator with train: estimator"),
        ([Stage(train="generator")], r"model\.stages\[0\]\.marginalize_with: re with train: generator"),
        ([Stage(marginalize_with="retriever")], r"model\.stages\[0\]\.marginalize_with: retriever with train: both"),
        (
            [Stage(steps=1), Stage(train="generator", re_learns_from="labels", marginalize_with="retriever")],
            r"model\.stages\[1\]\.re_learns_from: the RE does not train",
        ),
        ([Stage(train="estimator ")], r"model\.stages\[0\]\.train: must be one of"),
        ([Stage(schedule="epoch")], r"model\.stages\[0\]\.schedule: must be one of"),
    ],
)
def test_a_combination_the_method_does_not_define_is_refused_by_stage_and_field(stages, message):
    with pytest.raises(ValueError, match=message):
        check_stages(stages)


def test_a_plan_places_the_stages_on_the_fits_steps():
    plan = Plan(TEACHER_THEN_JOINT, total=10)
    assert (plan.starts, plan.ends, plan.boundaries()) == ([0, 3], [3, 10], [3])
    assert [plan.index(step) for step in (0, 2, 3, 9, 10, 50)] == [0, 0, 1, 1, 1, 1]
    assert plan.last_training_end("generator") == 10 and Plan(RE_ALONE, 10).last_training_end("generator") == 0
    assert Plan(GENERATOR_THEN_RE, 10).last_training_end("generator") == 2


def linear(steps):
    """A step -> factor that decays from 1 to 0 over `steps`, standing in for transformers' schedules."""
    return lambda step: 1 - step / steps


def test_a_models_rate_spans_its_run_stages_and_restarts_in_a_stage_schedule():
    plan = Plan(GENERATOR_THEN_RE, total=6)
    generator, estimator = (plan.rate_factor(m, linear) for m in ("generator", "estimator"))
    assert [generator(s) for s in range(6)] == [1.0, 0.5, 0, 0, 0, 0]
    assert [estimator(s) for s in range(6)] == [0, 0, 1.0, 0.75, 0.5, 0.25]
    joint = Plan(TEACHER_THEN_JOINT, total=7)  # the RE trains throughout: one span over 7 steps
    assert [joint.rate_factor("estimator", linear)(s) for s in (0, 3, 6)] == pytest.approx([1.0, 4 / 7, 1 / 7])
    assert [joint.rate_factor("generator", linear)(s) for s in (2, 3, 5)] == [0, 1.0, 0.5]
    by_stage = Plan([Stage(steps=2, train="estimator", re_learns_from="teacher", schedule="stage"), Stage()], 6)
    assert [by_stage.rate_factor("estimator", linear)(s) for s in range(6)] == [1.0, 0.5, 1.0, 0.75, 0.5, 0.25]
    assert by_stage.schedule_starts() == [0, 2]
