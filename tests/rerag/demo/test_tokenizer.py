"""The shipped demo tokenizer: general English, fitted to no dataset (rerag/demo/tokenizer.py)."""

from erag.lm import load_tokenizer
from rerag.demo.tokenizer import english_word_texts
from rerag.demo.world import WorldConfig, build_world


def test_english_word_texts_follow_zipf_and_skip_wordpiece_entries():
    texts = english_word_texts(scale=100)
    words = [t.split(" ") for t in texts]
    assert words[0] == ["the"] * 100 and words[1] == ["The"] * 25  # rank 1, then its capitalized form
    assert len(words[2]) == 50  # rank 2: ceil(100 / 2)
    assert not any(w.startswith(("##", "[")) for ws in words for w in ws)


def test_common_words_are_single_tokens_in_any_world():
    tok = load_tokenizer("rerag:assets/demo_tokenizer")
    for word in ("year", "first", "water", "launched", "master", "born", "city"):
        assert len(tok.tokenize(f" {word}")) == 1, word


def test_demo_world_names_are_not_single_tokens():
    """Names split into pieces in the demo world as in any other: its text trained nothing."""
    tok = load_tokenizer("rerag:assets/demo_tokenizer")
    corpus, _ = build_world(WorldConfig(seed=0, n_train_people=40, n_dev_people=5, n_test_people=5))
    names = {d["title"] for d in corpus}
    pieces = [len(tok.tokenize(" " + n)) for n in names]
    assert sum(p > 2 for p in pieces) / len(pieces) > 0.9  # a first name and a surname: more than 2 pieces
