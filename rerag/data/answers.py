"""Answer normalization and matching shared by the data, the metrics and the decoders.

`normalize_answer` is SQuAD's (lower case, no punctuation, no articles, single spaces); it
decides exact match and groups equal answers during marginalization. `has_answer` is DPR's
match of an answer's tokens inside a passage, used when a FiD record lacks `has_answer`.
"""
from __future__ import annotations

import re
import string
import unicodedata

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
# DPR's SimpleTokenizer: runs of letters/digits/marks, or any other non-space character.
_DPR_TOKEN = re.compile(r"[\w\u0300-\u036f]+|[^\w\s]", re.UNICODE)


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower, strip punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, answers: list[str]) -> bool:
    """True when the normalized prediction equals any normalized gold answer."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(a) for a in answers)


def _dpr_tokens(text: str) -> list[str]:
    return [t.lower() for t in _DPR_TOKEN.findall(unicodedata.normalize("NFD", text))]


def has_answer(answers: list[str], text: str) -> bool:
    """DPR-style match: some answer's token sequence occurs contiguously in the text."""
    tokens = _dpr_tokens(text)
    for answer in answers:
        ans = _dpr_tokens(answer)
        n = len(ans)
        if n and any(tokens[i : i + n] == ans for i in range(len(tokens) - n + 1)):
            return True
    return False
