from eor import NoRetriever


def test_retrieval_free_returns_no_passages():
    retriever = NoRetriever()
    assert retriever.retrieve(["q1", "q2"]) == [[], []]
    assert str(retriever) == "ReFree"
