"""Answer text, defined once for every package (rerag, eor and erag import it from here).

- `normalize_answer`: SQuAD's normalization (lower case, no punctuation, no articles, single spaces).
- `exact_match(prediction, references)` and `token_f1(prediction, references)`: SQuAD's EM and
  token F1 against the best reference, as floats in [0, 1].
- `has_answer(passage, answers)`: DPR's answer matching (Karpukhin et al., 2020): some answer's
  token sequence occurs in the passage's token sequence. Call it on the passage text only, never
  on a title: DPR labels a passage by its text.

Every function takes the text being judged first and the gold strings second.
"""

from __future__ import annotations

import collections
import re
import string
import unicodedata
from collections.abc import Sequence

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# DPR's SimpleTokenizer: runs of letters, digits and combining marks, or any other non-space character.
_DPR_TOKEN = re.compile(r"(?:[^\W_]|[\u0300-\u036f])+|[^\w\s]|_")


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower case, drop punctuation and articles, collapse white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _check(text: object, references: object, names: tuple[str, str]) -> None:
    # Catches the swapped-argument mistake (gold list first) that would otherwise give wrong labels silently.
    if not isinstance(text, str):
        raise TypeError(f"{names[0]} must be a string, got {type(text).__name__}")
    if isinstance(references, str) or not all(isinstance(r, str) for r in references):
        raise TypeError(f"{names[1]} must be a list of strings, got {references!r:.80}")


def exact_match(prediction: str, references: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals a normalized reference, else 0.0."""
    _check(prediction, references, ("prediction", "references"))
    normalized = normalize_answer(prediction)
    return float(any(normalized == normalize_answer(ref) for ref in references))


def _f1(prediction_tokens: list[str], reference_tokens: list[str]) -> float:
    if not prediction_tokens or not reference_tokens:  # SQuAD 2.0: an empty answer matches only an empty one
        return float(prediction_tokens == reference_tokens)
    overlap = sum((collections.Counter(prediction_tokens) & collections.Counter(reference_tokens)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(prediction_tokens), overlap / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, references: Sequence[str]) -> float:
    """SQuAD token F1 between the normalized prediction and the best normalized reference."""
    _check(prediction, references, ("prediction", "references"))
    tokens = normalize_answer(prediction).split()
    return max((_f1(tokens, normalize_answer(ref).split()) for ref in references), default=0.0)


def _dpr_tokens(text: str) -> list[str]:
    return _DPR_TOKEN.findall(unicodedata.normalize("NFD", text).lower())


def has_answer(passage: str, answers: Sequence[str]) -> bool:
    """DPR-style match: some answer's token sequence occurs contiguously in the passage text."""
    _check(passage, answers, ("passage", "answers"))
    tokens = _dpr_tokens(passage)
    for answer in answers:
        needle = _dpr_tokens(answer)
        if needle and any(tokens[i : i + len(needle)] == needle for i in range(len(tokens) - len(needle) + 1)):
            return True
    return False
