import pytest

from eor import Compress, Concat, NoRetriever, Registry, Rerank, RetrieverNameError, Truncate, parse_retriever
from eor.retrievers.base import BaseRetriever


class Named(BaseRetriever):
    def retrieve(self, questions):
        return [[] for _ in questions]


@pytest.fixture
def registry():
    return Registry(
        bases=[Named("BM25"), Named("Dense"), Named("SE"), Named("PK"), NoRetriever()],
        rerankers={"RR": lambda q, p: [0.0] * len(p), "RE": lambda q, p: [1.0] * len(p)},
        compressors={"CP": lambda prompts: prompts},
    )


NAMES = [
    "BM25",
    "ReFree",
    "BM25@5",
    "BM25@RR",
    "BM25@RR@5",
    "Dense@10@CP",
    "BM25@RR@5&Dense@5@CP",
    "SE@2&Dense@5",
    "SE&Dense&PK",
    "(SE&Dense@20&PK)@RR@10",
    "(SE&Dense)@RE@10@CP",
    "(BM25@20)@RR",
    "(BM25@CP)&Dense",
    "(BM25&Dense)&PK",
    "(BM25@5)@2",
    "(BM25@CP)@CP",
    "((BM25@RR@5&Dense@5@CP)&PK)@RR@3@CP",
]


@pytest.mark.parametrize("name", NAMES)
def test_names_round_trip(registry, name):
    assert str(parse_retriever(name, registry)) == name
    assert str(registry.build(name)) == name


def test_parse_builds_the_paper_tree(registry):
    tree = registry.build("BM25@RR@5&Dense@5@CP")
    assert isinstance(tree, Compress) and isinstance(tree.child, Concat)
    first, second = tree.child.children
    assert isinstance(first, Truncate) and first.k == 5 and isinstance(first.child, Rerank)
    assert first.child.child is registry.by_name["BM25"] and first.child.reranker is registry.rerankers["RR"]
    assert tree.generate is registry.compressors["CP"] and second.child is registry.by_name["Dense"]


def test_whitespace_is_tolerated(registry):
    assert str(registry.build(" BM25@5 & Dense ")) == "BM25@5&Dense"


@pytest.mark.parametrize(
    ("name", "position", "problem"),
    [
        ("BM25@@5", 4, "unexpected character '@'"),
        ("Foo@5", 0, "unknown base retriever 'Foo'"),
        ("BM25@XX", 4, "unknown op '@XX'"),
        ("BM25@5@RR", 6, "@RR must come right after a base retriever or ')'"),
        ("BM25@CP@5", 7, "unexpected '@5'"),
        ("BM25&", 5, "expected a base retriever or '(', found the end"),
        ("(BM25&Dense", 11, "expected ')'"),
        ("BM25)", 4, "unexpected ')'"),
        ("BM25@0", 4, "truncation @k needs k >= 1"),
        ("", 0, "expected a base retriever or '(', found the end"),
        ("BM25 Dense", 5, "unexpected 'Dense'"),
    ],
)
def test_malformed_names_say_where(registry, name, position, problem):
    with pytest.raises(RetrieverNameError) as error:
        registry.build(name)
    assert error.value.position == position and problem in error.value.problem
    assert f"at position {position}" in str(error.value)
    assert str(error.value).endswith("\n  " + " " * position + "^")


def test_registry_refuses_duplicates_and_clashing_ops():
    with pytest.raises(ValueError, match="unique"):
        Registry(bases=[Named("A"), Named("A")])
    with pytest.raises(ValueError, match="both"):
        Registry(bases=[Named("A")], rerankers={"X": None}, compressors={"X": None})
