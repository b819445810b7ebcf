import pytest

from eor import CP_PROMPT, Compress, Concat, DenseReranker, Encoder, NoRetriever, Passage, Rerank, Truncate
from eor.retrievers.base import BaseRetriever


class Listed(BaseRetriever):
    """A base retriever returning fixed passages whatever the question."""

    def __init__(self, name, texts):
        super().__init__(name)
        self.texts = texts

    def retrieve(self, questions):
        return [[Passage(f"{self.name}{i}", "", t, -i) for i, t in enumerate(self.texts)] for _ in questions]


A, B = Listed("A", ["a0", "a1", "a2"]), Listed("B", ["b0", "b1"])


def texts(retriever, question="q"):
    return [p.text for p in retriever.retrieve([question])[0]]


def test_truncation_keeps_the_top_k():
    assert texts(Truncate(A, 2)) == ["a0", "a1"]
    with pytest.raises(ValueError):
        Truncate(A, 0)


def test_concatenation_keeps_source_order():
    assert texts(Concat([Truncate(A, 1), B])) == ["a0", "b0", "b1"]


def test_rerank_sorts_by_the_reranker_scores():
    calls = []

    def reranker(question, passages):
        calls.append((question, passages))
        return [len(p) + (p == "a1") for p in passages]

    reranked = Rerank(A, reranker).retrieve(["why?"])[0]
    assert [p.text for p in reranked] == ["a1", "a0", "a2"] and reranked[0].score == 3.0
    assert calls == [("why?", ["a0", "a1", "a2"])]


def test_rerank_checks_the_number_of_scores():
    with pytest.raises(ValueError, match="returned 1 scores for 3 passages"):
        Rerank(A, lambda q, p: [1.0]).retrieve(["q"])


def test_compression_uses_the_paper_prompt_and_skips_empty_inputs():
    prompts = []

    def generate(batch):
        prompts.extend(batch)
        return ["summary"] * len(batch)

    assert [[p.text for p in r] for r in Compress(A, generate).retrieve(["q1"])] == [["summary"]]
    assert prompts == [CP_PROMPT.format(query="q1", document="a0\na1\na2")]
    assert prompts[0].startswith("Please truthfully summarize the document below") and prompts[0].endswith("summary:")
    assert Compress(NoRetriever(), generate).retrieve(["q"]) == [[]] and len(prompts) == 1


def test_dense_reranker_scores_cosine_similarity(encoder_dir):
    reranker = DenseReranker(Encoder(encoder_dir))
    scores = reranker("capital of italy", ["rome is the capital of italy", "capital of italy", "nile"])
    assert len(scores) == 3 and max(scores) == pytest.approx(scores[1]) and scores[1] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    ("retriever", "name"),
    [
        (Truncate(Rerank(A, None), 5), "A@RR@5"),
        (Compress(Concat([Truncate(Rerank(A, None), 5), Truncate(B, 5)]), None), "A@RR@5&B@5@CP"),
        (Rerank(Truncate(A, 20), None), "(A@20)@RR"),
        (Truncate(Rerank(Concat([A, B]), None), 10), "(A&B)@RR@10"),
        (Concat([Compress(A, None), B]), "(A@CP)&B"),
        (Concat([Concat([A, B]), A]), "(A&B)&A"),
        (Compress(Compress(A, None), None), "(A@CP)@CP"),
        (Truncate(Truncate(A, 5), 2), "(A@5)@2"),
    ],
)
def test_names_follow_the_paper_notation(retriever, name):
    assert str(retriever) == name
