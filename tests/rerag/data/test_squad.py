"""The SQuAD builder on a hand-made three-article SQuAD 2.0 file: passages, splits, flags, errors."""

import json
import re

import pytest

from rerag.data.fid_format import FiDFormatError, read_fid
from rerag.data.squad import make_squad, passage_spans

# Sentences of 10, 11, 11, 9 and 10 words.
ALPHA = (
    "The Alpha River rises in the northern hills of Norland. Its source was mapped by the surveyor "
    "Mara Quill in 1820. The river then flows south through the old town of Brint. Ferries cross it "
    "at Brint every hour in summer. Its mouth lies in the Grey Sea near Port Olen."
)
BETA = "Beta Island lies in the Grey Sea. Its only village is Port Olen, founded by fishermen."
# The title holds "Mara Quill", the text does not: has_answer must not look at titles.
QUILL = "She was born in Brint and died at sea in 1851. Quill Peak is named after her."


def qa(qid, question, context, *answers, impossible=False):
    spans = [{"text": a, "answer_start": context.index(a)} for a in answers]
    return {
        "id": qid,
        "question": question,
        "answers": [] if impossible else spans,
        "is_impossible": impossible,
        **({"plausible_answers": spans} if impossible else {}),
    }


def squad():
    return {
        "version": "v2.0",
        "data": [
            {
                "title": "Alpha_River",
                "paragraphs": [
                    {
                        "context": ALPHA,
                        "qas": [
                            qa("a1", "Who mapped the source of the Alpha River?", ALPHA, "Mara Quill"),
                            qa("a2", "Where is the mouth of the Alpha River?", ALPHA, "the Grey Sea", "Grey Sea"),
                            qa(
                                "a3", "What year and what came next?", ALPHA, "1820. The river"
                            ),  # crosses a sentence end
                            qa("a4", "Who mapped the mouth of the Alpha River?", ALPHA, "Mara Quill", impossible=True),
                        ],
                    }
                ],
            },
            {
                "title": "Beta_Island",
                "paragraphs": [
                    {
                        "context": BETA,
                        "qas": [
                            qa("b1", "What is the only village on Beta Island?", BETA, "Port Olen"),
                            {"id": "b2", "question": "Who founded Beta Island?", "answers": []},
                        ],
                    }
                ],
            },  # unanswerable, no flag
            {
                "title": "Mara_Quill",
                "paragraphs": [{"context": QUILL, "qas": [qa("m1", "When did the surveyor die?", QUILL, "1851")]}],
            },
        ],
    }


ARTICLE = {"a1": 0, "a2": 0, "a3": 0, "a4": 0, "b1": 1, "b2": 1, "m1": 2}


def write(path, data):
    path.write_text(json.dumps(data))
    return path


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("squad")
    out = root / "out"
    counts = make_squad(write(root / "squad.json", squad()), out, max_words=20)
    return out, counts


def test_passages_are_whole_sentences_within_max_words_and_keep_answer_spans():
    ends = [ALPHA.index(s) + len(s) for s in ("Norland.", "1820.", "Brint.", "summer.", "Port Olen.")]
    texts = lambda spans: [ALPHA[s:e].strip() for s, e in spans]  # noqa: E731
    spans = passage_spans(ALPHA, [], max_words=20)
    assert [e for _, e in spans][:-1] == [ends[0] + 1, ends[1] + 1, ends[3] + 1]  # cut after whole sentences
    assert [len(t.split()) for t in texts(spans)] == [10, 11, 20, 10]
    assert "".join(ALPHA[s:e] for s, e in spans) == ALPHA
    start = ALPHA.index("1820. The river")
    kept = passage_spans(ALPHA, [(start, start + 15)], max_words=20)
    # 1820. ends sentence 2, so sentences 2 and 3 stay together (22 words, over the limit).
    assert [len(t.split()) for t in texts(kept)] == [10, 22, 19]
    assert all(not (s < start < e < start + 15) for s, e in kept)


def test_corpus_holds_every_article_and_splits_are_by_article(built):
    out, counts = built
    corpus = lines(out / "corpus.jsonl")
    assert counts["passages"] == len(corpus) == 3 + 1 + 1
    assert {p["title"] for p in corpus} == {"Alpha River", "Beta Island", "Mara Quill"}
    split_of = {}
    for split in ("train", "dev", "test"):
        for name in (split, f"{split}_unanswerable"):
            for record in lines(out / f"{name}.jsonl") if (out / f"{name}.jsonl").exists() else []:
                split_of[record["id"]] = split
    assert set(split_of) == set(ARTICLE)  # every question once
    by_article = {}
    for qid, split in split_of.items():
        by_article.setdefault(ARTICLE[qid], set()).add(split)
    assert all(len(s) == 1 for s in by_article.values())  # no article in two splits
    assert sorted(s.pop() for s in by_article.values()) == ["dev", "test", "train"]
    assert [counts[f"{s}_articles"] for s in ("train", "dev", "test")] == [1, 1, 1]


def test_gold_is_the_answer_span_passage_and_has_answer_reads_text_only(built):
    out, _ = built
    records = {r["id"]: r for f in out.glob("*.jsonl") if f.name != "corpus.jsonl" for r in lines(f)}
    ids = {p["text"]: p["id"] for p in lines(out / "corpus.jsonl")}

    def flags(qid, key):
        return {c["id"] for c in records[qid]["ctxs"] if c[key]}

    def holding(text):
        return {pid for t, pid in ids.items() if text in t}

    assert all(len(records[q]["ctxs"]) == 5 for q in ARTICLE)  # k >= corpus: every passage
    assert flags("a1", "gold") == holding("Mara Quill") == flags("a1", "has_answer")  # not the Mara Quill title
    assert flags("a2", "gold") == holding("mouth lies")
    assert flags("a2", "has_answer") == holding("Grey Sea") and len(holding("Grey Sea")) == 2  # Beta's too
    assert flags("a3", "gold") == holding("1820. The river")
    assert records["a2"]["answers"] == ["the Grey Sea", "Grey Sea"]
    assert all(c["gold"] == c["has_answer"] == False for q in ("a4", "b2") for c in records[q]["ctxs"])  # noqa: E712
    scores = [c["score"] for c in records["m1"]["ctxs"]]
    assert scores == sorted(scores, reverse=True)


def test_unanswerable_questions_have_their_own_file(built):
    out, _ = built
    written = {f.name for f in out.glob("*_unanswerable.jsonl")}
    assert len(written) == 2  # a4 (is_impossible) and b2 (empty answers) are in two articles
    for name in written:
        records = list(read_fid(out / name))  # marked unanswerable: read where answers are required
        assert all(r["answers"] == [] and r["unanswerable"] is True for r in records)
        assert all(r["unanswerable"] is True for r in lines(out / name))


def test_output_passes_read_fid_and_keeps_gold(built):
    out, _ = built
    answerable = [f for f in out.glob("*.jsonl") if f.name != "corpus.jsonl" and "unanswerable" not in f.name]
    assert len(answerable) == 3
    for f in answerable:
        for record in read_fid(f):
            assert all(isinstance(c["gold"], bool) for c in record["ctxs"])


def test_deterministic_for_a_seed_and_top_k_per_split(tmp_path):
    path = write(tmp_path / "squad.json", squad())
    for run in ("a", "b"):
        make_squad(path, tmp_path / run, seed=3, train_k=2, eval_k=4, max_words=20)
    files = sorted(f.name for f in (tmp_path / "a").iterdir())
    assert files == sorted(f.name for f in (tmp_path / "b").iterdir())
    assert all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    for f in files:
        if f != "corpus.jsonl":
            assert {len(r["ctxs"]) for r in lines(tmp_path / "a" / f)} == {2 if f.startswith("train") else 4}


def without_qas(data):
    del data["data"][1]["paragraphs"][0]["qas"]
    return data


def moved_answer(data):
    data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] += 3
    return data


@pytest.mark.parametrize(
    "make, where",
    [
        (without_qas, "field 'data[1].paragraphs[0].qas': missing"),
        (moved_answer, "field 'data[0].paragraphs[0].qas[1].answers[0].answer_start': text 'the Grey Sea' is not at"),
        (lambda _: "{not json", "line 1: not valid JSON"),
        (
            lambda data: json.dumps(data).replace("Beta Island lies", "Beta \udcff").encode("utf-8", "surrogateescape"),
            "line 1: field 'data[1].paragraphs[0].context': not valid UTF-8",
        ),
        (lambda _: {"version": "v2.0"}, "field 'data': missing"),
    ],
)
def test_bad_input_names_file_and_field(tmp_path, make, where):
    value = make(squad())
    path = tmp_path / "bad.json"
    if isinstance(value, bytes):
        path.write_bytes(value)
    else:
        path.write_text(value if isinstance(value, str) else json.dumps(value))
    with pytest.raises(
        FiDFormatError, match=re.escape(f"bad.json, {where}" if where.startswith("line") else f"bad.json: {where}")
    ):
        make_squad(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_named_articles_make_a_fold_whose_training_contexts_are_its_own(tmp_path):
    path = write(tmp_path / "squad.json", squad())
    counts = make_squad(path, tmp_path / "fold", test_articles=["Mara_Quill"], dev_articles=["Beta Island"], train_k=5)
    split_of = {
        r["id"]: name.split("_")[0]
        for name in ("train", "train_unanswerable", "dev", "dev_unanswerable", "test")
        for r in lines(tmp_path / "fold" / f"{name}.jsonl")
    }
    assert split_of == {
        "a1": "train",
        "a2": "train",
        "a3": "train",
        "a4": "train",
        "b1": "dev",
        "b2": "dev",
        "m1": "test",
    }
    assert [counts[f"{s}_articles"] for s in ("train", "dev", "test")] == [1, 1, 1]
    # no dev or test passage among the training contexts, though BM25 over every passage would rank them
    assert {c["title"] for r in lines(tmp_path / "fold" / "train.jsonl") for c in r["ctxs"]} == {"Alpha River"}
    test_titles = {c["title"] for r in lines(tmp_path / "fold" / "test.jsonl") for c in r["ctxs"]}
    assert test_titles == {"Alpha River", "Beta Island", "Mara Quill"}  # dev and test: open over every article


@pytest.mark.parametrize(
    "named, error",
    [
        (
            dict(test_articles=["Gamma"], dev_articles=["Beta_Island"]),
            "test_articles: no article 'Gamma'; the file holds Alpha River, Beta Island, Mara Quill",
        ),
        (
            dict(test_articles=["Mara_Quill"], dev_articles=["Mara Quill"]),
            "dev_articles: 'Mara Quill' is named for test and for dev",
        ),
        (dict(test_articles=["Mara_Quill", "Alpha_River"], dev_articles=["Beta_Island"]), "none is left to train on"),
        (dict(test_articles=["Mara_Quill"]), "dev_articles: name at least one article"),
        (dict(test_articles=["Mara_Quill"], dev_articles=["Beta_Island"], seed=1), "leave fractions and seed unset"),
    ],
)
def test_a_bad_named_split_is_refused_before_anything_is_written(tmp_path, named, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        make_squad(write(tmp_path / "squad.json", squad()), tmp_path / "out", **named)
    assert not (tmp_path / "out").exists()
