"""How a (question, context) pair becomes model input text, for every model and reader.

A context is a passage string or a FiD context dict (`{"title", "text", ...}`). Templates are
filled with `{question}`, `{title}`, `{text}` and `{context}` (the title, a newline, the text);
fields a template lacks are ignored. Both the data room and the models room import this.
"""

from __future__ import annotations

Context = str | dict


def passage_text(context: Context) -> str:
    """A context as one string: its title, a newline, its text (or the string itself)."""
    if isinstance(context, str):
        return context
    title = context.get("title", "")
    return f"{title}\n{context['text']}" if title else context["text"]


def fill(template: str, question: str, context: Context | None = None) -> str:
    """The template filled for one question and context (None: an empty context)."""
    c = {"title": "", "text": ""} if context is None else context
    c = c if isinstance(c, dict) else {"title": "", "text": c}
    return template.format(question=question, title=c.get("title", ""), text=c["text"], context=passage_text(c))


def format_pairs(template: str, questions: list[str], contexts: list[Context]) -> list[str]:
    """`fill` for aligned lists of questions and contexts."""
    return [fill(template, q, c) for q, c in zip(questions, contexts)]
