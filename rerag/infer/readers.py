"""Readers over RE-RAG's models: callables `(questions, contexts) -> answers` (the `erag.Reader`
contract), the door between `rerag`, `eor` and `erag`.

They read through one LM wrapper, `erag.lm` (`Seq2SeqLM` for the trained generator or any
encoder-decoder, `CausalLM` for any decoder-only model through its chat template; `load_lm`
picks one from a folder):
- `RAGReader`, mode "rag": one prompt per context, answers marginalized with context weights
  P(j) = softmax_j(w_j) (eq. 6): "fast" (each answer scored under its own context) or "thorough"
  (every candidate under every context). The weights are given (the RE's log-odds s, so
  P = P_RE of eq. 5), or come from a reranker `(question, passages) -> scores` such as
  `RelevanceEstimator.score`, or are uniform. Mode "ralm": the contexts joined into one prompt.
  Mode "fid" (an encoder-decoder only): Fusion-in-Decoder, one prompt per context through the
  encoder, the decoder attending to all of them at once; one answer, no weights (the eRAG paper's
  end-to-end reader, whose per-document reading is eRAG's labeller).
- `ParametricReader`: the LM alone, no context (the mixed strategy's fallback, Table 5).

The trained RE-RAG pair as a reader: `RAGReader(generator.as_lm(), reranker=estimator.score)`.
Contexts may be strings or FiD context dicts (`{"title", "text", ...}`). Templates are filled with
`{question}`, `{title}`, `{text}` and `{context}` (the title, a newline, the text). Every question
must be non-empty and, for `RAGReader`, have at least one context (ValueError otherwise); there is
no top-k here: a reader reads every context it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from erag.contracts import Reranker
from erag.lm import LM
from rerag.decoding import marginalize_answers, thorough_marginalize, unique_answers
from rerag.inputs import Context, fill, passage_text
from rerag.prompts import CLOSED_BOOK_TEMPLATE


def check_inputs(questions: list[str], contexts: list[list[Context]] | None, need_contexts: bool) -> None:
    """Readers fail loudly on inputs they cannot answer from, naming the question."""
    if contexts is not None and len(contexts) != len(questions):
        raise ValueError(f"got {len(questions)} questions but {len(contexts)} context lists")
    for i, question in enumerate(questions):
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"question {i} is empty")
        if need_contexts and not contexts[i]:
            raise ValueError(f"question {i} ({question!r}) has no contexts; a ParametricReader answers without any")


@dataclass
class Answer:
    text: str
    logprob: float  # rag: log P(y | q, C) of eq. 6; ralm and parametric: log P(y | prompt); fid: log P(y | fused C)


class RAGReader:
    """Answers from contexts with an LM; see the module docstring for modes and weights.

    Args:
        lm: a `Seq2SeqLM` or `CausalLM`, or a served LM (`erag.served.ServedLM`, mode "ralm" only).
        mode: "rag" (per-context generation, marginalized), "ralm" (contexts in one prompt) or "fid"
            (Fusion-in-Decoder: contexts encoded apart, decoded together; an encoder-decoder LM).
        marginalization: "fast" or "thorough" (mode "rag" only).
        template: the prompt; None takes the LM's.
        num_beams: beams per generation (1 = greedy).
        reranker: weights for `__call__` and for `answer` without weights; None = uniform.
        separator: joins contexts in mode "ralm".
    """

    def __init__(
        self,
        lm: LM,
        mode: Literal["rag", "ralm", "fid"] = "rag",
        marginalization: Literal["fast", "thorough"] = "fast",
        template: str | None = None,
        num_beams: int = 1,
        reranker: Reranker | None = None,
        separator: str = "\n\n",
    ):
        if mode not in ("rag", "ralm", "fid"):
            raise ValueError(f"mode must be 'rag', 'ralm' or 'fid', got {mode!r}")
        if marginalization not in ("fast", "thorough"):
            raise ValueError(f"marginalization must be 'fast' or 'thorough', got {marginalization!r}")
        if mode == "rag" and not getattr(lm, "gives_likelihoods", True):  # a served LM (`erag.served`)
            raise ValueError(
                "a served reader gives no log-likelihoods: mode 'rag' fuses per-context answers by them "
                "(RE-weighted marginalization, FiD-like); read with mode 'ralm' (--reader ralm) or an in-process --llm"
            )
        if mode == "fid" and not (hasattr(lm, "generate_fused") and lm.model.config.is_encoder_decoder):
            raise ValueError(
                "mode 'fid' (Fusion-in-Decoder) needs an in-process encoder-decoder LM; "
                "a decoder-only or served LM reads the contexts in one prompt (mode 'ralm')"
            )
        self.lm, self.mode, self.marginalization = lm, mode, marginalization
        self.template = lm.template if template is None else template
        self.num_beams, self.reranker, self.separator = num_beams, reranker, separator

    def __call__(self, questions: list[str], contexts: list[list[Context]]) -> list[str]:
        return [a.text for a in self.answer(questions, contexts)]

    def prompt(self, question: str, context: Context) -> str:
        return fill(self.template, question, context)

    def _weights(self, question: str, contexts: list[Context]) -> torch.Tensor:
        return torch.zeros(len(contexts)) if self.reranker is None else self.reranker(question, contexts)

    def answer(
        self, questions: list[str], contexts: list[list[Context]], weights: list[torch.Tensor] | None = None
    ) -> list[Answer]:
        """One answer per question. `weights[i][j]` are logits over question i's contexts (the RE's
        log-odds s: P = P_RE, eq. 5); None asks the reranker, or weighs contexts equally."""
        check_inputs(questions, contexts, need_contexts=True)
        if self.mode == "ralm":
            joined = [self.separator.join(passage_text(c) for c in cs) for cs in contexts]
            texts, loglik = self.lm.generate([self.prompt(q, j) for q, j in zip(questions, joined)], self.num_beams)
            return [Answer(t, ll.item()) for t, ll in zip(texts, loglik)]
        if self.mode == "fid":
            prompts = [[self.prompt(q, c) for c in cs] for q, cs in zip(questions, contexts)]
            texts, loglik = self.lm.generate_fused(prompts, self.num_beams)
            return [Answer(t, ll.item()) for t, ll in zip(texts, loglik)]
        if weights is None:
            weights = [self._weights(q, cs) for q, cs in zip(questions, contexts)]
        if len(weights) != len(contexts):
            raise ValueError(f"got {len(weights)} weight lists for {len(contexts)} questions")
        weights = [torch.as_tensor(w).float().cpu() for w in weights]
        for i, (w, cs) in enumerate(zip(weights, contexts)):
            if w.shape != (len(cs),):
                raise ValueError(f"question {i}: {tuple(w.shape)} weights for {len(cs)} contexts")
        prompts = [[self.prompt(q, c) for c in cs] for q, cs in zip(questions, contexts)]
        texts, loglik = self.lm.generate([p for ps in prompts for p in ps], self.num_beams)
        out, start = [], 0
        for ps, w in zip(prompts, weights):
            end = start + len(ps)
            if self.marginalization == "fast":
                out.append(Answer(*marginalize_answers(texts[start:end], w, loglik[start:end])))
            else:
                candidates = unique_answers(texts[start:end])
                f = self.lm.loglik([p for _ in candidates for p in ps], [y for y in candidates for _ in ps])
                out.append(Answer(*thorough_marginalize(candidates, w, f.view(len(candidates), len(ps)))))
            start = end
        return out


class ParametricReader:
    """The LM's parametric knowledge alone: contexts are ignored (the P-Generator of Table 5)."""

    def __init__(self, lm: LM, template: str = CLOSED_BOOK_TEMPLATE, num_beams: int = 1):
        self.lm, self.template, self.num_beams = lm, template, num_beams

    def __call__(self, questions: list[str], contexts: list[list[Context]] | None = None) -> list[str]:
        return [a.text for a in self.answer(questions)]

    def answer(self, questions: list[str]) -> list[Answer]:
        check_inputs(questions, None, need_contexts=False)
        texts, loglik = self.lm.generate([fill(self.template, q) for q in questions], self.num_beams)
        return [Answer(t, ll.item()) for t, ll in zip(texts, loglik)]
