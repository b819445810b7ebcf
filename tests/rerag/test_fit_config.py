"""rerag.fit_config: a bf16 precision on a CPU without bf16 instructions is flagged before the models load."""

import warnings

import pytest
from jsonargparse import Namespace

from rerag.fit_config import cpu_computes_bf16, warn_emulated_bf16


@pytest.fixture
def cpuinfo(tmp_path):
    def write(flags: str):
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f {flags}\n")
        return path

    return write


def test_bf16_instructions_are_read_from_the_cpu_flags(cpuinfo, tmp_path):
    assert cpu_computes_bf16(cpuinfo("avx512_bf16")) is True
    assert cpu_computes_bf16(cpuinfo("amx_bf16 amx_tile")) is True
    assert cpu_computes_bf16(cpuinfo("")) is False
    assert cpu_computes_bf16(tmp_path / "absent") is None  # not Linux: unknown, no warning


def test_bf16_on_a_cpu_without_it_warns_with_the_float32_overrides(cpuinfo):
    trainer = Namespace(accelerator="cpu", precision="bf16-mixed")
    with pytest.warns(UserWarning, match="--trainer.precision 32-true --model.estimator.dtype null"):
        warn_emulated_bf16(trainer, cpuinfo(""))


@pytest.mark.parametrize(
    "precision, flags", [("32-true", ""), ("bf16-mixed", "avx512_bf16"), ("bf16-true", "amx_bf16")]
)
def test_float32_or_a_cpu_with_bf16_does_not_warn(cpuinfo, precision, flags):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_emulated_bf16(Namespace(accelerator="cpu", precision=precision), cpuinfo(flags))
