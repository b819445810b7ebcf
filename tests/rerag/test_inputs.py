from rerag.inputs import passage_windows


def test_passage_windows_cover_the_passage_at_half_window_strides():
    context = {"id": "c", "title": "T", "text": " ".join(f"w{i}" for i in range(25))}
    windows = passage_windows(context, 10)
    assert [w["text"].split()[0] for w in windows] == ["w0", "w5", "w10", "w15"]  # the last flush with the end
    assert all(len(w["text"].split()) == 10 and (w["id"], w["title"]) == ("c", "T") for w in windows)
    assert {word for w in windows for word in w["text"].split()} == set(context["text"].split())
    assert passage_windows(context, 25) == [context]
    assert passage_windows(context["text"], 10) == [w["text"] for w in windows]  # a plain string too
    assert passage_windows("a b c d e f g", 4) == ["a b c d", "c d e f", "d e f g"]
