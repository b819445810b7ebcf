import numpy as np
import pytest

from eor import DenseRetriever, Encoder, load_corpus


@pytest.fixture(scope="module")
def encoder(encoder_dir):
    return Encoder(encoder_dir)


def test_flat_index_returns_exact_inner_product_ranking(corpus_path, encoder):
    corpus = load_corpus(corpus_path)
    retriever = DenseRetriever(corpus, encoder, k=4)
    question = "Which city is the capital of Italy?"
    [passages] = retriever.retrieve([question])
    expected = encoder.encode([p.to_text() for p in corpus]) @ encoder.encode([question])[0]
    assert [p.id for p in passages] == [corpus[i].id for i in np.argsort(-expected)[:4]]
    np.testing.assert_allclose([p.score for p in passages], np.sort(expected)[::-1][:4], rtol=1e-4, atol=1e-5)
    assert str(retriever) == "Dense"


def test_a_passage_is_its_own_nearest_neighbour(corpus_path, encoder):
    corpus = load_corpus(corpus_path)
    results = DenseRetriever(corpus, encoder, k=1).retrieve([p.to_text() for p in corpus])
    assert [r[0].id for r in results] == [p.id for p in corpus]


@pytest.mark.parametrize("index", ["ivf", "hnsw"])
def test_ivf_and_hnsw_options_build_and_search(corpus_path, encoder, index):
    corpus = load_corpus(corpus_path)
    retriever = DenseRetriever(corpus, encoder, k=3, index=index, nlist=2, nprobe=2)
    results = retriever.retrieve([p.to_text() for p in corpus[:3]])
    assert all(0 < len(r) <= 3 for r in results)
    assert [r[0].id for r in results] == ["p0", "p1", "p2"]


def test_unknown_index_is_refused(corpus_path, encoder):
    with pytest.raises(ValueError, match="index must be"):
        DenseRetriever(load_corpus(corpus_path), encoder, index="lsh")
