import pytest

from eor import BM25Retriever, load_corpus


def test_bm25_ranks_the_matching_passage_first(corpus_path):
    retriever = BM25Retriever(load_corpus(corpus_path), k=3)
    results = retriever.retrieve(["What is the capital of Germany?", "highest mountain on Earth"])
    assert [len(r) for r in results] == [3, 3]
    assert results[0][0].id == "p1" and results[1][0].id == "p4"
    assert results[0][0].score >= results[0][1].score >= results[0][2].score
    assert str(retriever) == "BM25"


def test_bm25_caps_k_at_corpus_size_and_handles_unknown_words(corpus_path):
    retriever = BM25Retriever(load_corpus(corpus_path), k=100, name="Sparse")
    assert len(retriever.retrieve(["zzzz qqqq"])[0]) == 8
    assert retriever.retrieve([]) == []
    assert str(retriever) == "Sparse"


def test_bad_name_and_empty_corpus_are_refused(corpus_path):
    with pytest.raises(ValueError, match="name"):
        BM25Retriever(load_corpus(corpus_path), name="BM25@5")
    with pytest.raises(ValueError, match="non-empty"):
        BM25Retriever([])
