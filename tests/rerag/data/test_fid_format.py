import json
import logging
import re

import pytest

from rerag.data.dataset import load_fid_dataset
from rerag.data.fid_format import FiDFormatError, read_fid

GOOD = {
    "id": "q1",
    "question": "where was Ana born?",
    "answers": ["Soltha"],
    "ctxs": [
        {"id": "p1", "title": "Ana", "text": "Ana was born in Soltha.", "score": "3.5"},
        {"id": "p2", "title": "Ana", "text": "Ana liked bees.", "score": 1.0},
    ],
}


def write_jsonl(path, records):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def numbered(*records):
    """The records with ids q1, q2, ... (ids must be unique within a file)."""
    return [{**r, "id": f"q{i}"} for i, r in enumerate(records, 1)]


def bad(**changes):
    record = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is KeyError:
            record.pop(key)
        else:
            record[key] = value
    return record


@pytest.mark.parametrize(
    "record, field",
    [
        (bad(answers=KeyError), "answers"),
        (bad(ctxs=[]), "ctxs"),
        (bad(ctxs=[{"title": 7, "text": "x"}]), "ctxs[0].title"),
        (bad(answers="Soltha"), "answers"),
        (bad(question=""), "question"),
        (bad(ctxs=[{"title": "t", "text": "x", "score": "high"}]), "ctxs[0].score"),
    ],
)
def test_bad_record_names_file_line_and_field(tmp_path, record, field):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(GOOD, GOOD, record))
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
    path = write_jsonl(tmp_path / "d.jsonl", numbered(GOOD, bad(ctxs=[]), GOOD))
    with caplog.at_level(logging.WARNING):
        records = list(read_fid(path, skip_invalid=True))
    assert len(records) == 2
    assert "skipped 1 invalid record" in caplog.text


def test_dataset_is_cached_and_revalidated_when_the_file_changes(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(GOOD, GOOD))
    cache = str(tmp_path / "cache")
    assert len(load_fid_dataset(path, cache_dir=cache)) == 2
    assert len(load_fid_dataset(path, cache_dir=cache)) == 2
    write_jsonl(path, numbered(GOOD, bad(ctxs=[]), GOOD))
    with pytest.raises(FiDFormatError, match="line 2: field 'ctxs'"):
        load_fid_dataset(path, cache_dir=cache)


# Malformed-input holes: each gets a FiDFormatError naming file, place and field, from
# both readers (the lazy `read_fid` and the cached `load_fid_dataset`).
def with_id(record_id, **changes):
    record = bad(**changes)
    if record_id is KeyError:
        record.pop("id")
    else:
        record["id"] = record_id
    return record


@pytest.fixture(params=["read_fid", "load_fid_dataset"])
def load(request, tmp_path):
    if request.param == "read_fid":
        return lambda path, **kw: list(read_fid(path, **kw))
    return lambda path, **kw: list(load_fid_dataset(path, cache_dir=str(tmp_path / "cache"), **kw))


def test_duplicate_id_names_both_places(tmp_path, load):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD, with_id("q2"), "", with_id("q2")])
    with pytest.raises(
        FiDFormatError, match=re.escape("d.jsonl, line 4: field 'id': duplicate id 'q2'; line 2 already has it")
    ) as err:
        load(path)
    assert (err.value.line, err.value.field) == (4, "id")
    # Not a per-record problem: skipping cannot choose between the two, so it still raises.
    with pytest.raises(FiDFormatError, match="duplicate id 'q2'"):
        load(path, skip_invalid=True)


def test_missing_ids_default_to_the_records_position(tmp_path, load):
    path = tmp_path / "d.json"  # one line: every record starts on line 1, yet ids stay unique
    path.write_text(json.dumps([with_id(KeyError), with_id(KeyError), with_id(KeyError)]))
    assert [r["id"] for r in load(path)] == ["1", "2", "3"]
    # A given id equal to another record's default collides like any duplicate.
    path.write_text(json.dumps([with_id("2"), with_id(KeyError)]))
    with pytest.raises(
        FiDFormatError,
        match=re.escape(
            "d.json, record 2, line 1: field 'id': duplicate id '2' (the record has no id; it defaults "
            "to its position); record 1, line 1 already has it"
        ),
    ):
        load(path)


@pytest.mark.parametrize("score", [float("nan"), float("inf"), "-inf", "NaN"])
def test_non_finite_score(tmp_path, load, score):
    record = bad(ctxs=[GOOD["ctxs"][0], {"title": "t", "text": "x", "score": score}])
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD, record])  # json.dumps writes NaN / Infinity
    with pytest.raises(
        FiDFormatError, match=re.escape("d.jsonl, line 2: field 'ctxs[1].score': must be a finite number")
    ) as err:
        load(path)
    assert (err.value.line, err.value.field) == (2, "ctxs[1].score")
    # A per-record problem: skipped and counted.
    assert len(load(path, skip_invalid=True)) == 1


def test_non_utf8_byte_names_line_record_and_field(tmp_path, load):
    latin1 = json.dumps(
        bad(ctxs=[GOOD["ctxs"][0], {"title": "Ana", "text": "Ana aimait le caf\u00e9."}]), ensure_ascii=False
    ).encode("latin-1")
    path = tmp_path / "d.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + latin1 + b"\n")
    with pytest.raises(
        FiDFormatError, match=re.escape("d.jsonl, line 2: field 'ctxs[1].text': not valid UTF-8 (byte 0xe9")
    ) as err:
        load(path)
    assert (err.value.line, err.value.field) == (2, "ctxs[1].text")
    path = tmp_path / "d.json"
    path.write_bytes(b"[\n" + json.dumps(GOOD).encode() + b",\n" + latin1 + b"\n]\n")
    with pytest.raises(
        FiDFormatError, match=re.escape("d.json, record 2, line 3: field 'ctxs[1].text': not valid UTF-8 (byte 0xe9")
    ):
        load(path)
    path.write_bytes(b"[" + json.dumps(GOOD).encode() + b", \xff]")  # the byte breaks the JSON itself
    with pytest.raises(FiDFormatError, match=re.escape("d.json, line 1: not valid UTF-8 (byte 0xff")):
        load(path)


@pytest.mark.parametrize("text", ["", "\n  \n", "[]", " [\n]\n"])
def test_empty_file_is_an_error(tmp_path, load, text):
    path = tmp_path / "d.json"
    path.write_text(text)
    with pytest.raises(
        FiDFormatError, match=re.escape("d.json: no records (an empty file or an empty JSON list)")
    ) as err:
        load(path)
    assert err.value.line is None and err.value.field is None


def test_nothing_left_after_skipping_is_an_error(tmp_path, load):
    path = write_jsonl(tmp_path / "d.jsonl", [bad(ctxs=[]), bad(question="")])
    with pytest.raises(FiDFormatError, match=re.escape("d.jsonl: no valid record (all 2 skipped)")):
        load(path, skip_invalid=True)


def test_one_line_json_list_reports_the_record_number(tmp_path, load):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([GOOD, with_id("q2"), with_id("q3", ctxs=[])]))
    with pytest.raises(FiDFormatError, match=re.escape("d.json, record 3, line 1: field 'ctxs': is empty")) as err:
        load(path)
    assert (err.value.record, err.value.line, err.value.field) == (3, 1, "ctxs")


def test_has_answer_is_computed_on_the_passage_text_not_the_title(tmp_path):
    # DPR labels a passage by its text: "Soltha" in the title alone is not a hit.
    record = {
        "id": "q1",
        "question": "where was Ana born?",
        "answers": ["Soltha"],
        "ctxs": [
            {"id": "p1", "title": "Soltha", "text": "A town in the north.", "score": 2.0},
            {"id": "p2", "title": "Ana", "text": "Ana was born in Soltha.", "score": 1.0},
        ],
    }
    [read] = read_fid(write_jsonl(tmp_path / "d.jsonl", [record]))
    assert [c["has_answer"] for c in read["ctxs"]] == [False, True]


def test_gold_flag_is_kept_and_checked(tmp_path):
    marked = {**GOOD, "ctxs": [{**GOOD["ctxs"][0], "gold": True, "other": 1}, GOOD["ctxs"][1]]}
    (record,) = read_fid(write_jsonl(tmp_path / "d.jsonl", [marked]))
    assert record["ctxs"][0]["gold"] is True and "other" not in record["ctxs"][0]
    assert "gold" not in record["ctxs"][1]  # not invented where the file has none
    marked["ctxs"][0]["gold"] = "yes"
    with pytest.raises(FiDFormatError, match=r"line 1: field 'ctxs\[0\].gold': must be a boolean"):
        list(read_fid(write_jsonl(tmp_path / "d.jsonl", [marked])))


def test_the_cached_dataset_keeps_gold_and_leaves_it_unknown_where_absent(tmp_path):
    with_gold = {**GOOD, "ctxs": [{**GOOD["ctxs"][0], "gold": True}, {**GOOD["ctxs"][1], "gold": False}]}
    path = write_jsonl(tmp_path / "d.jsonl", numbered(with_gold, GOOD))
    ds = load_fid_dataset(path, cache_dir=str(tmp_path / "cache"))
    assert [c["gold"] for c in ds[0]["ctxs"]] == [True, False]
    assert [c["gold"] for c in ds[1]["ctxs"]] == [None, None]


def test_a_question_marked_unanswerable_is_read_where_answers_are_required(tmp_path):
    none = {**GOOD, "answers": [], "unanswerable": True}
    (record,) = read_fid(write_jsonl(tmp_path / "d.jsonl", [none]))
    assert record["unanswerable"] is True and not any(c["has_answer"] for c in record["ctxs"])
    ds = load_fid_dataset(write_jsonl(tmp_path / "both.jsonl", numbered(GOOD, none)), cache_dir=str(tmp_path / "c"))
    assert ds["unanswerable"] == [False, True]
    with pytest.raises(FiDFormatError, match="line 1: field 'answers': is empty"):
        list(read_fid(write_jsonl(tmp_path / "d.jsonl", [{**GOOD, "answers": []}])))
    with pytest.raises(FiDFormatError, match="line 1: field 'unanswerable': must be true"):
        list(read_fid(write_jsonl(tmp_path / "d.jsonl", [{**GOOD, "unanswerable": True}])))


def outcome(path):
    """The records read_fid yields from `path`, or the error it raises."""
    try:
        return list(read_fid(path))
    except FiDFormatError as err:
        return str(err).replace(str(path), "FILE")


STREAMED_FILES = {
    "list.json": "[\n" + ",\n".join(json.dumps(r, indent=1) for r in numbered(GOOD, GOOD, GOOD)) + "\n]\n",
    "one_line.json": json.dumps(numbered(GOOD, GOOD)),
    "rows.jsonl": "\n".join(json.dumps(r) for r in numbered(GOOD, GOOD)) + "\n\n" + json.dumps({**GOOD, "id": "q3"}),
    "broken.json": "[\n" + json.dumps(GOOD, indent=1) + ",\n" + json.dumps(GOOD, indent=1)[:-9] + "\n]\n",
    "broken.jsonl": json.dumps(GOOD) + "\n" + json.dumps(GOOD)[:-3] + "\n",
    "open.json": "[\n" + json.dumps(GOOD, indent=1) + ",\n",
    "bad_field.json": "["
    + json.dumps(numbered(GOOD, bad(question=""))[0])
    + ",\n\n"
    + json.dumps(bad(question=""))
    + "]",
}


@pytest.mark.parametrize("name", sorted(STREAMED_FILES))
def test_a_file_read_in_pieces_reads_as_it_does_whole(tmp_path, monkeypatch, name):
    """Records, and errors with their lines and records, do not depend on where the pieces end
    (every length from one byte), and a .gz file reads as the file it holds."""
    import gzip

    import rerag.data.fid_format as fid_format

    path = tmp_path / name
    path.write_text(STREAMED_FILES[name])
    whole = outcome(path)
    assert "line" in whole if isinstance(whole, str) else len(whole) >= 2
    for size in (1, 2, 3, 7, 64):
        monkeypatch.setattr(fid_format, "CHUNK_BYTES", size)
        assert outcome(path) == whole, size
    gz = tmp_path / f"{name}.gz"
    gz.write_bytes(gzip.compress(STREAMED_FILES[name].encode()))
    assert outcome(gz) == whole  # its own name in place of FILE


def test_a_record_longer_than_the_limit_is_an_error_not_a_whole_file_read(tmp_path, monkeypatch):
    import rerag.data.fid_format as fid_format

    monkeypatch.setattr(fid_format, "CHUNK_BYTES", 16)
    monkeypatch.setattr(fid_format, "MAX_RECORD_CHARS", 64)
    path = tmp_path / "long.json"
    path.write_text("[" + json.dumps({**GOOD, "question": "x" * 500}) + "]")
    with pytest.raises(FiDFormatError, match=r"record 1, line 1: not valid JSON"):
        list(read_fid(path))


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_reading_a_file_takes_memory_that_does_not_grow_with_the_file(tmp_path, suffix):
    """Python's peak allocation (tracemalloc) while streaming a file 8 times the size stays near the
    smaller file's: records are decoded one at a time, never the whole text. A deep record's error
    still names its line and field."""
    import tracemalloc

    def write(n: int, broken: bool = False):
        records = [
            {**GOOD, "id": f"q{i}", "ctxs": [{"title": "t", "text": f"passage {i} {j} " * 40} for j in range(10)]}
            for i in range(n)
        ]
        if broken:
            records[-1]["question"] = ""
        path = tmp_path / f"{n}{'-broken' if broken else ''}{suffix}"
        if suffix == ".json":
            path.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
        else:
            write_jsonl(path, records)
        return path

    def peak(path) -> int:
        tracemalloc.start()
        try:
            assert sum(1 for _ in read_fid(path)) > 0
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = write(250), write(2000)
    assert large.stat().st_size > 7 * small.stat().st_size
    assert peak(large) < 1.5 * peak(small) < large.stat().st_size / 2
    with pytest.raises(FiDFormatError, match=rf"{re.escape(str(tmp_path))}.*line 200\d: field 'question'"):
        list(read_fid(write(2000, broken=True)))
