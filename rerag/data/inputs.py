"""How a (question, context) pair becomes model input text: one template for each model."""
from __future__ import annotations

DEFAULT_TEMPLATE = "question: {question} title: {title} context: {text}"


def format_pairs(template: str, questions: list[str], contexts: list[dict | str]) -> list[str]:
    """Fill `template` ({question}, {title}, {text}) for each pair; a context may be a string."""
    out = []
    for q, c in zip(questions, contexts):
        c = c if isinstance(c, dict) else {"title": "", "text": c}
        out.append(template.format(question=q, title=c.get("title", ""), text=c["text"]))
    return out
