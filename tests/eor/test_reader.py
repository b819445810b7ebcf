import pytest

from eor import NoRetriever, Passage, read_pool
from eor.retrievers.base import BaseRetriever


class Echo(BaseRetriever):
    def retrieve(self, questions):
        return [[Passage("1", "T", f"{self.name} on {q}")] for q in questions]


def test_reader_sees_every_retrievers_contexts_in_batches():
    calls = []

    def reader(questions, contexts):
        calls.append(len(questions))
        return [c[0] if c else "none" for c in contexts]

    output = read_pool([Echo("A"), NoRetriever()], reader, ["q1", "q2", "q3"], batch_size=2)
    assert output.names == ["A", "ReFree"] and calls == [2, 1, 2, 1]
    assert output.answers == [["T\nA on q1", "T\nA on q2", "T\nA on q3"], ["none"] * 3]
    assert output.contexts[1] == [[], [], []]


def test_pool_checks_names_and_reader_output():
    with pytest.raises(ValueError, match="unique"):
        read_pool([Echo("A"), Echo("A")], lambda q, c: q, ["q"])
    with pytest.raises(ValueError, match="returned 0 answers"):
        read_pool([Echo("A")], lambda q, c: [], ["q"])
