import json

import pytest

from eor import CorpusError, Passage, load_corpus


def test_load_corpus_reads_every_passage(corpus_path):
    passages = load_corpus(corpus_path)
    assert len(passages) == 8
    assert passages[0] == Passage("p0", "France", "Paris is the capital of France and its largest city.")
    assert passages[0].to_text() == "France\nParis is the capital of France and its largest city."


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "title": "T"}', "field 'text' is missing"),
        ('{"id": "x", "title": 3, "text": "t"}', "field 'title' must be a string"),
        ('{"id": [1], "title": "T", "text": "t"}', "field 'id' must be a string or an integer"),
        ('{"id": "x", "title": "T", "text": "t"', "not valid JSON"),
        ('["x", "T", "t"]', "expected a JSON object"),
        ('{"id": "a", "title": "T", "text": "t"}', "field 'id' repeats id 'a' from line 1"),
    ],
)
def test_bad_line_names_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "a", "title": "A", "text": "a"}) + "\n\n" + line + "\n")
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    assert f"{path}:3: " in str(error.value) and message in str(error.value)


def test_integer_ids_become_strings(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": 7, "title": "", "text": "seven"}\n')
    assert load_corpus(path) == [Passage("7", "", "seven")]
    assert load_corpus(path)[0].to_text() == "seven"
