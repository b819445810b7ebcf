import json
import re
import logging

import pytest

from rerag.data.dataset import load_fid_dataset
from rerag.data.fid_format import FiDFormatError, read_fid

GOOD = {"id": "q1", "question": "where was Ana born?", "answers": ["Soltha"],
        "ctxs": [{"id": "p1", "title": "Ana", "text": "Ana was born in Soltha.", "score": "3.5"},
                 {"id": "p2", "title": "Ana", "text": "Ana liked bees.", "score": 1.0}]}


def write_jsonl(path, records):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def bad(**changes):
    record = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is KeyError:
            record.pop(key)
        else:
            record[key] = value
    return record


@pytest.mark.parametrize("record, field", [
    (bad(answers=KeyError), "answers"),
    (bad(ctxs=[]), "ctxs"),
    (bad(ctxs=[{"title": 7, "text": "x"}]), "ctxs[0].title"),
    (bad(answers="Soltha"), "answers"),
    (bad(question=""), "question"),
    (bad(ctxs=[{"title": "t", "text": "x", "score": "high"}]), "ctxs[0].score"),
])
def test_bad_record_names_file_line_and_field(tmp_path, record, field):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD, GOOD, record])
    with pytest.raises(FiDFormatError, match=re.escape(f"d.jsonl, line 3: field '{field}'")) as err:
        list(read_fid(path))
    assert err.value.line == 3 and err.value.field == field


def test_line_that_is_not_json(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD, "{not json"])
    with pytest.raises(FiDFormatError, match=r"d\.jsonl, line 2: not valid JSON"):
        list(read_fid(path))


def test_missing_file(tmp_path):
    with pytest.raises(FiDFormatError, match="nope.json: file not found"):
        load_fid_dataset(tmp_path / "nope.json")


def test_json_list_reports_the_record_line(tmp_path):
    path = tmp_path / "d.json"
    text = json.dumps([GOOD, bad(ctxs=[])], indent=2)
    path.write_text(text)
    first_line_of_second = [i for i, line in enumerate(text.split("\n"), 1) if line == "  {"][1]
    with pytest.raises(FiDFormatError, match=rf"line {first_line_of_second}: field 'ctxs'"):
        list(read_fid(path))


def test_canonical_form_and_computed_has_answer(tmp_path):
    (record,) = read_fid(write_jsonl(tmp_path / "d.jsonl", [GOOD]))
    assert [c["score"] for c in record["ctxs"]] == [3.5, 1.0]
    assert [c["has_answer"] for c in record["ctxs"]] == [True, False]


def test_skipping_is_counted_not_silent(tmp_path, caplog):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD, bad(ctxs=[]), GOOD])
    with caplog.at_level(logging.WARNING):
        records = list(read_fid(path, skip_invalid=True))
    assert len(records) == 2
    assert "skipped 1 invalid record" in caplog.text


def test_dataset_is_cached_and_revalidated_when_the_file_changes(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD, GOOD])
    cache = str(tmp_path / "cache")
    assert len(load_fid_dataset(path, cache_dir=cache)) == 2
    assert len(load_fid_dataset(path, cache_dir=cache)) == 2
    write_jsonl(path, [GOOD, bad(ctxs=[]), GOOD])
    with pytest.raises(FiDFormatError, match="line 2: field 'ctxs'"):
        load_fid_dataset(path, cache_dir=cache)
