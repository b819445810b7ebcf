"""benchmarks/serving_formats.py: on a tiny exported RE, every system scores as rerag does and the table prints."""

import importlib.util
import sys
from pathlib import Path

from tests.rerag.conftest import (  # noqa: F401 (fixtures)
    causal_inputs,
    causal_module_kwargs,
    chat_tokenizer_dir,
    tokenizer_dir,
    world_dir,
)
from tests.rerag.infer.test_serving import causal_export, whole_tokenizer_dir  # noqa: F401 (fixtures)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as running the script does: it imports `common` beside it
spec = importlib.util.spec_from_file_location("serving_formats", BENCHMARKS / "serving_formats.py")
serving_formats = importlib.util.module_from_spec(spec)
spec.loader.exec_module(serving_formats)


def test_the_table_has_every_system_equal_to_rerag(causal_export, world_dir, monkeypatch, capsys):
    out, _, _ = causal_export
    argv = ["serving_formats.py", "--export", str(out), "--data", str(world_dir / "test.jsonl")]
    timed = ["--timed", "rerag predict", "CrossEncoder"]
    monkeypatch.setattr(sys, "argv", argv + ["--pairs", "60", "--equal-pairs", "40", *timed])
    serving_formats.main()
    rows = [
        line.split(" | ")
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ") and "---" not in line
    ]
    assert [r[0].strip("| ") for r in rows[1:]] == ["rerag predict", "CrossEncoder", "sequence classifier"]
    for row in rows[1:]:
        assert float(row[2]) <= 1e-4 and float(row[3]) == 1.0
    assert [int(r[1]) for r in rows[1:]] == [60, 60, 40]  # the timed systems score every pair
    assert all(float(r[4]) > 0 for r in rows[1:])
