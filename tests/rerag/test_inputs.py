import pytest

from rerag.inputs import lengths_mix, passage_windows, window_rows


def test_passage_windows_cover_the_passage_at_half_window_strides():
    context = {"id": "c", "title": "T", "text": " ".join(f"w{i}" for i in range(25))}
    windows = passage_windows(context, 10)
    assert [w["text"].split()[0] for w in windows] == ["w0", "w5", "w10", "w15"]  # the last flush with the end
    assert all(len(w["text"].split()) == 10 and (w["id"], w["title"]) == ("c", "T") for w in windows)
    assert {word for w in windows for word in w["text"].split()} == set(context["text"].split())
    assert passage_windows(context, 25) == [context]
    assert passage_windows(context["text"], 10) == [w["text"] for w in windows]  # a plain string too
    assert passage_windows("a b c d e f g", 4) == ["a b c d", "c d e f", "d e f g"]


def test_the_lengths_mix_rule_cuts_only_the_lists_that_mix_short_and_long_passages():
    short, window, long = "a b c", "a b c d", "a b c d e f g h"  # 3, 4 and 8 words against windows of 4
    assert lengths_mix([short, long], 4) and not lengths_mix([window, long], 4) and not lengths_mix([short, window], 4)
    contexts, questions = [short, long, window, long], ["q1", "q1", "q2", "q2"]
    rows, row_of = window_rows(contexts, 4, "lengths_mix", questions)
    assert rows == [short, "a b c d", "c d e f", "e f g h", window, long]  # q1's list mixes, q2's stays whole
    assert row_of == [0, 1, 1, 1, 2, 3]
    assert window_rows(contexts, 4)[1] == [0, 1, 1, 1, 2, 3, 3, 3]  # "always": every longer passage cut
    assert window_rows(contexts, 4, "lengths_mix")[1] == [0, 1, 1, 1, 2, 3, 3, 3]  # one list: it mixes
    with pytest.raises(ValueError, match="window rule: one of always, lengths_mix, got 'some'"):
        window_rows(contexts, 4, "some")
