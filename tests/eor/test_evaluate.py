import json

import pytest

from eor import BM25Retriever, EoRConfig, NoRetriever, Registry, evaluate_eor, load_corpus
from eor.analysis import ERRORS

QUESTIONS = [
    ("What is the capital of France?", ["Paris"]),
    ("What is the capital of Germany?", ["Berlin"]),
    ("What is the capital of Italy?", ["Rome"]),
    ("What is the capital of Spain?", ["Madrid"]),
    ("Which is the highest mountain on Earth?", ["Everest", "Mount Everest"]),
    ("Which river flows north through Africa?", ["Nile", "the Nile"]),
    ("Which is the largest planet?", ["Jupiter"]),
    ("Who created the Python programming language?", ["Guido van Rossum"]),
]


def first_word_reader(questions, contexts):
    """Answers with the first word of the first passage's text, or a guess without passages."""
    return [c[0].split("\n")[-1].split()[0] if c else "Paris" for c in contexts]


@pytest.fixture
def pool(corpus_path):
    registry = Registry(bases=[BM25Retriever(load_corpus(corpus_path)), NoRetriever()])
    return [registry.build(name) for name in ("BM25@1", "BM25@3", "ReFree")]


def test_evaluation_learns_weights_and_reports(pool, tmp_path):
    config = EoRConfig(train_fraction=0.5, save_weights=str(tmp_path / "w.json"), plots_dir=str(tmp_path / "plots"))
    report = evaluate_eor(*zip(*QUESTIONS), pool, first_word_reader, config)
    assert (report.num_train, report.num_test) == (4, 4)
    assert list(report.retriever_em) == ["BM25@1", "BM25@3", "ReFree"] and list(report.mrlr_with_eor)[-1] == "EoR"
    assert all(0 <= v <= 100 for v in [*report.retriever_em.values(), *report.retriever_f1.values(), report.eor_em])
    assert report.eor_em >= max(report.retriever_em.values()) - 25  # one test question is worth 25 points
    assert report.train_accuracy is not None and 0 <= report.train_accuracy <= 1
    assert json.loads((tmp_path / "w.json").read_text())["retrievers"].keys() == report.retriever_em.keys()
    assert (tmp_path / "plots" / "rwr_heatmap.png").exists() and (tmp_path / "plots" / "upper_bound.png").exists()
    assert "| EoR |" in report.table() and report.to_dict()["weights"]["pooling"] == "mean"
    assert all((tmp_path / "plots" / f"error_rwr_{e}.png").exists() for e in ERRORS)  # figure 4
    assert set(report.error_rates) == set(ERRORS)
    assert report.error_rates["retriever"]["ReFree"] == 100.0  # it reads nothing: every question a retriever error
    assert {name: len(v) for name, v in report.train_em.items()} == dict.fromkeys([*report.retriever_em, "EoR"], 4)
    assert 100 * sum(report.test_f1["EoR"]) / 4 == pytest.approx(report.eor_f1)  # per test question, for Table 4

    reloaded = evaluate_eor(*zip(*QUESTIONS), pool, first_word_reader, EoRConfig(weights=str(tmp_path / "w.json")))
    assert (reloaded.num_train, reloaded.num_test, reloaded.train_accuracy) == (0, 8, None)
    assert reloaded.weights == report.weights
    assert reloaded.train_em == {}  # no search split: nothing drifts from it


def test_evaluation_refuses_bad_inputs(pool):
    with pytest.raises(ValueError, match="gold answer lists"):
        evaluate_eor(["q"], [], pool, first_word_reader)
    with pytest.raises(ValueError, match="empty split"):
        evaluate_eor(*zip(*QUESTIONS), pool, first_word_reader, EoRConfig(train_fraction=1.0))


def test_a_fixed_test_split_learns_on_the_other_questions_and_reports_on_it(pool):
    """The paper's protocol (weights from a validation split, reported on a test split): the
    retrieval-free reader always says "Paris", right only on the first question."""
    report = evaluate_eor(*zip(*QUESTIONS), pool, first_word_reader, test_indices=range(5, 8))
    assert (report.num_train, report.num_test) == (5, 3) and report.retriever_em["ReFree"] == 0.0
    report = evaluate_eor(*zip(*QUESTIONS), pool, first_word_reader, test_indices=[1, 0])
    assert (report.num_train, report.num_test) == (6, 2) and report.retriever_em["ReFree"] == 50.0


def sentence_reader(questions, contexts):
    """Answers in a sentence around the first word of the first passage, as an LLM does."""
    return [f"I think it is {c[0].split(chr(10))[-1].split()[0]}." if c else "I think it is Paris." for c in contexts]


def test_correctness_by_containment_credits_sentence_long_answers(pool):
    """An LLM's sentence is never an exact match: by EM nothing is right and MRLR is 0; counted
    right when a gold answer occurs in it, the same reading has the first-word reader's accuracy."""
    args = (*zip(*QUESTIONS), pool)
    words = evaluate_eor(*args, first_word_reader, EoRConfig(train_fraction=0.5))
    by_em = evaluate_eor(*args, sentence_reader, EoRConfig(train_fraction=0.5))
    contained = evaluate_eor(*args, sentence_reader, EoRConfig(train_fraction=0.5, correctness="contains"))
    assert all(
        v == 0 for v in [*by_em.retriever_em.values(), *by_em.retriever_accuracy.values(), *by_em.mrlr_pool.values()]
    )
    assert contained.retriever_em == by_em.retriever_em  # EM is reported as it is
    assert contained.retriever_accuracy == words.retriever_accuracy == words.retriever_em
    assert contained.mrlr_pool == words.mrlr_pool and any(v > 0 for v in contained.mrlr_pool.values())
    with pytest.raises(ValueError, match="correctness"):
        EoRConfig(correctness="bem")
