"""benchmarks/fid_memory.py: its four forms of one generated file hold the same records, and a fresh
process converts one into a fresh cache, takes a training batch and reports its count, peak memory
and times."""

import importlib.util
from pathlib import Path

from rerag.data.fid_format import read_fid

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("fid_memory", ROOT / "benchmarks" / "fid_memory.py")
fid_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fid_memory)


def test_the_forms_hold_the_same_records_and_a_process_converts_them(tmp_path):
    files = fid_memory.write_files(tmp_path, questions=5, passages=20)
    read = [list(read_fid(path)) for path in files.values()]
    assert len(read[0]) == 5 and all(records == read[0] for records in read)
    scratch = tmp_path / "scratch"
    records, peak, convert, first = fid_memory.measure(fid_memory.CONVERT, files["JSONL.gz"], None, scratch)
    assert records == "5", records
    assert float(peak.replace(",", "")) > 0 and float(convert) >= 0 and float(first) >= 0
    assert not scratch.exists()  # the run's cache is removed
