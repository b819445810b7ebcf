"""Paper-style retriever names (section 2.1) parsed into retrievers, e.g. `BM25@RR@5&Dense@5@CP`.

Grammar, following the operation priority @RR > @k > & > @CP::

    name   := concat ["@" COMPRESSOR]
    concat := term ("&" term)*
    term   := atom ["@" RERANKER] ["@" INTEGER]
    atom   := BASE | "(" name ")"

BASE, RERANKER and COMPRESSOR are the names the caller registers in a `Registry`.
`str(parse_retriever(name, registry)) == name` for every name the ops print.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eor.ops import Compress, Concat, Rerank, Reranker, Truncate
from eor.retrievers.base import BASE_NAME, Generate, Retriever

_OP_NAME = re.compile(r"[A-Za-z_]\w*")
_TOKEN = re.compile(rf"\s*(?:(?P<punct>[()&])|@(?P<int>\d+)|@(?P<op>{_OP_NAME.pattern})|(?P<base>{BASE_NAME.pattern}))")


class RetrieverNameError(ValueError):
    """A malformed retriever name; the message shows the name with a caret under the fault."""

    def __init__(self, name: str, position: int, problem: str):
        super().__init__(f"{problem} at position {position} of retriever name {name!r}\n  {name}\n  {' ' * position}^")
        self.name, self.position, self.problem = name, position, problem


@dataclass
class Registry:
    """The building blocks a name may use: base retrievers (named by `str(retriever)`),
    rerankers for @RR-type ops and generate callables for @CP-type ops, by op name."""

    bases: Sequence[Retriever]
    rerankers: Mapping[str, Reranker] = field(default_factory=dict)
    compressors: Mapping[str, Generate] = field(default_factory=dict)

    def __post_init__(self):
        self.by_name = {str(b): b for b in self.bases}
        if len(self.by_name) != len(self.bases):
            raise ValueError("base retriever names must be unique")
        for name in self.by_name:
            if not BASE_NAME.fullmatch(name):
                raise ValueError(f"base retriever name {name!r} must match {BASE_NAME.pattern}")
        for op in [*self.rerankers, *self.compressors]:
            if not _OP_NAME.fullmatch(op):
                raise ValueError(f"op name {op!r} must match {_OP_NAME.pattern}")
        clash = set(self.rerankers) & set(self.compressors)
        if clash:
            raise ValueError(f"op names used both for reranking and compression: {sorted(clash)}")

    def build(self, name: str) -> Retriever:
        """The retriever that `name` denotes."""
        return parse_retriever(name, self)


def parse_retriever(name: str, registry: Registry) -> Retriever:
    """Parse a paper-style name into a retriever built from `registry`; raise `RetrieverNameError`."""
    return _Parser(name, registry).parse()


class _Parser:
    def __init__(self, name: str, registry: Registry):
        self.name, self.registry = name, registry
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, position)
        position = 0
        while position < len(name.rstrip()):
            match = _TOKEN.match(name, position)
            if not match:
                start = len(name) - len(name[position:].lstrip())
                self.fail(start, f"unexpected character {name[start]!r}")
            kind = match.lastgroup
            start = match.start(kind) - (kind in ("int", "op"))  # point at the '@'
            self.tokens.append((kind, match.group(kind), start))
            position = match.end()
        self.tokens.append(("end", "", len(name)))
        self.i = 0

    def fail(self, position: int, problem: str):
        raise RetrieverNameError(self.name, position, problem)

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self) -> tuple[str, str, int]:
        self.i += 1
        return self.tokens[self.i - 1]

    def parse(self) -> Retriever:
        retriever = self.name_()
        kind, text, position = self.peek()
        if kind != "end":
            self.fail(position, self.misplaced(kind, text))
        return retriever

    def misplaced(self, kind: str, text: str) -> str:
        if kind == "op" and text in self.registry.rerankers:
            return f"@{text} must come right after a base retriever or ')' (priority @RR > @k > & > @CP)"
        if kind in ("int", "op"):
            return f"unexpected '@{text}' (priority @RR > @k > & > @CP; use parentheses to apply it again)"
        return f"unexpected {text!r}" if text else "unexpected end"

    def name_(self) -> Retriever:
        retriever = self.concat()
        kind, text, position = self.peek()
        if kind == "op" and text in self.registry.compressors:
            self.take()
            retriever = Compress(retriever, self.registry.compressors[text], op=text)
        elif kind == "op" and text not in self.registry.rerankers:
            self.fail(position, f"unknown op '@{text}'; known: {self.known_ops()}")
        return retriever

    def concat(self) -> Retriever:
        terms = [self.term()]
        while self.peek()[0] == "punct" and self.peek()[1] == "&":
            self.take()
            terms.append(self.term())
        return terms[0] if len(terms) == 1 else Concat(terms)

    def term(self) -> Retriever:
        retriever = self.atom()
        kind, text, position = self.peek()
        if kind == "op" and text in self.registry.rerankers:
            self.take()
            retriever = Rerank(retriever, self.registry.rerankers[text], op=text)
            kind, text, position = self.peek()
        if kind == "int":
            self.take()
            if int(text) < 1:
                self.fail(position, "truncation @k needs k >= 1")
            retriever = Truncate(retriever, int(text))
        return retriever

    def atom(self) -> Retriever:
        kind, text, position = self.take()
        if kind == "base":
            if text not in self.registry.by_name:
                self.fail(
                    position, f"unknown base retriever {text!r}; known: {', '.join(self.registry.by_name) or 'none'}"
                )
            return self.registry.by_name[text]
        if kind == "punct" and text == "(":
            retriever = self.name_()
            kind, text, position = self.take()
            if (kind, text) != ("punct", ")"):
                self.fail(position, self.misplaced(kind, text) if kind != "end" else "expected ')'")
            return retriever
        self.fail(
            position,
            f"expected a base retriever or '(', found {text!r}"
            if text
            else "expected a base retriever or '(', found the end",
        )

    def known_ops(self) -> str:
        return ", ".join(f"@{op}" for op in [*self.registry.rerankers, *self.registry.compressors]) or "none"
