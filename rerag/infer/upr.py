"""UPR, the unsupervised passage reranker (Sachan et al., 2022): a passage's score for a question is
the log-likelihood of the question under a zero-shot LM that reads the passage and an instruction to
write a question about it, log P(q | c) (the paper's eq. 2 up to the question's length, which one
question's passages share, so the ranking is the paper's).

A rival of the RE at the same size: it reads each passage with the question as its target, so it
scores every question token per passage, where the RE reads one position. Causal LMs are read under
their chat template, seq2seq LMs as the encoder's input (`erag.lm.encode_prompts`). A passage scored
for several questions runs its prompt once per batch of its questions (`target_logliks`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from erag.lm import load_tokenizer
from rerag.inputs import fill
from rerag.models.generator import Generator
from rerag.models.loading import ModelSpec, build_model
from rerag.prompts import UPR_TEMPLATE
from rerag.teacher_cache import MAX_QUESTION_TOKENS, target_logliks


class UPRScorer:
    """Scores (question, passages) by log P(q | `template` filled with the passage), under `lm`."""

    def __init__(self, lm: Generator, batch_size: int = 16, max_question_tokens: int = MAX_QUESTION_TOKENS):
        self.lm, self.batch_size, self.max_question_tokens = lm.eval(), batch_size, max_question_tokens

    @classmethod
    def load(
        cls,
        model: str,
        tokenizer: str | None = None,
        template: str = UPR_TEMPLATE,
        max_length: int = 512,
        dtype: str | None = None,
        trust_remote_code: bool = False,
        batch_size: int = 16,
    ) -> UPRScorer:
        """A zero-shot LM by name, folder, `package:path` or GGUF file (`rerag.models.loading`), reading
        prompts of at most `max_length` tokens (the passage is cut, never the instruction)."""
        tok = load_tokenizer(tokenizer or model, trust_remote_code)
        spec = ModelSpec(name_or_path=model, trust_remote_code=trust_remote_code, dtype=dtype)
        spec.check("model")
        lm = build_model(spec, tok).requires_grad_(False)
        return cls(Generator(lm, tok, template=template, max_length=max_length), batch_size)

    @torch.no_grad()
    def score(self, questions: Sequence[str], contexts: Sequence[Sequence[dict | str]]) -> list[torch.Tensor]:
        """log P(q_i | c_ij) for every question and each of its contexts: one [len(contexts[i])] float32
        tensor per question."""
        rows = {}
        for i, (question, passages) in enumerate(zip(questions, contexts)):
            for j, passage in enumerate(passages):
                prompt = fill(self.lm.template, "", passage)
                rows[f"{i}:{j}"] = (prompt, question, prompt)
        scores = target_logliks(self.lm, rows, self.max_question_tokens, self.batch_size, "UPR")
        return [
            torch.tensor([scores[f"{i}:{j}"] for j in range(len(passages))], dtype=torch.float32)
            for i, passages in enumerate(contexts)
        ]
