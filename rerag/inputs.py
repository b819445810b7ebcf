"""How a (question, context) pair becomes model input text, for every model and reader.

A context is a passage string or a FiD context dict (`{"title", "text", ...}`). Templates are
filled with `{question}`, `{title}`, `{text}` and `{context}` (the title, a newline, the text);
fields a template lacks are ignored. `InputSpec` holds the settings of that text which the models
and the datamodule share. Both the data room and the models room import this.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rerag.prompts import DEFAULT_TEMPLATE

Context = str | dict


@dataclass(frozen=True)
class InputSpec:
    """The text each model reads and writes: declared once, read by the models (`model.inputs`) and by
    the datamodule, which tokenizes with the same tokenizers and settings (the CLI links
    `data.init_args.inputs` to it).

    Args:
        re_tokenizer: the RE's tokenizer name or folder.
        generator_tokenizer: the generator's tokenizer name or folder.
        re_template: the RE's input text, filled with {question}, {title}, {text}, {context}.
        re_max_length: RE input tokens (the passage is cut, never the template).
        generator_template: the generator's input text (the same fields).
        generator_max_length: generator input tokens.
        max_answer_length: answer tokens, the EOS included (labels and generation).
        true_word: the RE's positive label word; one token at the first answer position.
        false_word: the RE's negative label word; one token there.
    """

    re_tokenizer: str = "t5-base"
    generator_tokenizer: str = "t5-base"
    re_template: str = DEFAULT_TEMPLATE
    re_max_length: int = 256
    generator_template: str = DEFAULT_TEMPLATE
    generator_max_length: int = 256
    max_answer_length: int = 16
    true_word: str = "true"
    false_word: str = "false"

    def check(self) -> None:
        """A setting out of its range, named (`model.inputs.<field>`)."""
        for field in ("re_max_length", "generator_max_length", "max_answer_length"):
            if getattr(self, field) < 1:
                raise ValueError(f"model.inputs.{field}: must be at least 1, got {getattr(self, field)}")


torch.serialization.add_safe_globals([InputSpec])  # checkpoints' hyperparameters hold it


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


def passage_windows(context: Context, n_words: int) -> list[Context]:
    """`context` as overlapping windows of `n_words` words of its text (stride n_words // 2, the last
    one flush with the end; the context itself when no longer), each a context of the same kind. An
    RE trained on windows of one length scores a passage by its best window (MaxP): scored whole, it
    rewards what a longer passage holds more of."""
    words = (context if isinstance(context, str) else context["text"]).split()
    if len(words) <= n_words:
        return [context]
    starts = list(range(0, len(words) - n_words + 1, max(1, n_words // 2)))
    if starts[-1] != len(words) - n_words:
        starts.append(len(words) - n_words)
    texts = [" ".join(words[i : i + n_words]) for i in starts]
    return texts if isinstance(context, str) else [context | {"text": t} for t in texts]


def window_rows(contexts: list[Context], n_words: int) -> tuple[list[Context], list[int]]:
    """Every context's `passage_windows`, flattened, and the index in `contexts` of each window's
    context (what `rerag.models.estimator.pool_windows` reduces by)."""
    pieces = [passage_windows(c, n_words) for c in contexts]
    return [w for ws in pieces for w in ws], [j for j, ws in enumerate(pieces) for _ in ws]
