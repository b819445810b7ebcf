"""Readers backed by Hugging Face language models: the LLM M of §2 as a callable
``(questions, contexts) -> answers``.

``HFReader`` reads through the project's one LM wrapper (``erag.lm``: ``Seq2SeqLM`` or
``CausalLM``, picked from the model's config): it fills a prompt template, applies the tokenizer's
chat template when it has one, and decodes greedily, one batch per call. The documents of a
question are either concatenated into one prompt (in-prompt augmentation, IPA) or, for
encoder-decoder models, encoded one by one and fused in the decoder (Fusion-in-Decoder, FiD; §3.1
and Figure 3).
"""

from __future__ import annotations

from typing import Literal

import torch
from transformers import PreTrainedModel

from .lm import copy_source, fused_encoder_inputs, lm_for, load_lm
from .prompts import HF_READER_PROMPT


class HFReader:
    """Greedy, batched reader over a Hugging Face model.

    Args:
        model: a seq2seq or causal LM (``model.config.is_encoder_decoder`` tells which). Put it in
            eval mode and on its device before use; the reader changes neither.
        tokenizer: its tokenizer. When it has no pad token, its EOS token is set as pad token.
        prompt_template: formatted with ``question`` and ``context``.
        max_new_tokens: generation length limit.
        max_input_length: truncate prompts to this many tokens (None: no truncation).
        fusion: ``"concat"`` joins a question's documents into one prompt with
            ``context_separator``; ``"fid"`` (encoder-decoder only) encodes one prompt per document
            and lets the decoder attend to all of them.
        generate_kwargs: extra arguments for ``model.generate`` (e.g. ``min_new_tokens``).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer,
        *,
        prompt_template: str = HF_READER_PROMPT,
        max_new_tokens: int = 32,
        max_input_length: int | None = None,
        fusion: Literal["concat", "fid"] = "concat",
        context_separator: str = "\n\n",
        generate_kwargs: dict | None = None,
    ):
        self.is_encoder_decoder = bool(model.config.is_encoder_decoder)
        if fusion not in ("concat", "fid"):
            raise ValueError(f"fusion must be 'concat' or 'fid', got {fusion!r}")
        if fusion == "fid" and not self.is_encoder_decoder:
            raise ValueError("fusion='fid' needs an encoder-decoder model")
        self.lm = lm_for(
            model, tokenizer, template=prompt_template, max_length=max_input_length, max_new_tokens=max_new_tokens
        )
        self.model, self.tokenizer = model, self.lm.tokenizer
        self.prompt_template, self.max_new_tokens = prompt_template, max_new_tokens
        self.fusion, self.context_separator = fusion, context_separator
        self.generate_kwargs = generate_kwargs or {}

    @classmethod
    def from_pretrained(cls, name_or_path: str, *, model_kwargs: dict | None = None, **reader_kwargs) -> HFReader:
        """Load tokenizer and model (seq2seq or causal, read from the config) and build a reader.
        ``model_kwargs`` go to ``from_pretrained`` (e.g. ``dtype``, ``device_map``)."""
        lm = load_lm(name_or_path, model_kwargs=model_kwargs)
        return cls(lm.model, lm.tokenizer, **reader_kwargs)

    def prompt(self, question: str, context: str) -> str:
        """The prompt for one question and context (the chat template is applied when encoding)."""
        return self.prompt_template.format(question=question, context=context)

    def _encode(self, prompts: list[str]) -> dict[str, torch.Tensor]:
        return self.lm.encode(prompts, padding_side="right" if self.is_encoder_decoder else "left")

    def _generate(self, **inputs) -> torch.Tensor:
        return self.model.generate(
            **inputs,
            do_sample=False,
            num_beams=1,
            max_new_tokens=self.max_new_tokens,
            pad_token_id=self.tokenizer.pad_token_id,
            **self.generate_kwargs,
        )

    def _fid_inputs(self, questions: list[str], contexts: list[list[str]]) -> dict:
        """Encode each (question, document) prompt alone; concatenate a question's encoder states
        (`erag.lm.fused_encoder_inputs`)."""
        counts = [max(len(docs), 1) for docs in contexts]  # an empty list gets one empty context
        prompts = [self.prompt(question, doc) for question, docs in zip(questions, contexts) for doc in (docs or [""])]
        inputs = fused_encoder_inputs(self.model, self._encode(prompts), counts)
        return {
            "encoder_outputs": inputs["encoder_outputs"],
            "attention_mask": inputs["attention_mask"],
            **copy_source(self.model, inputs["input_ids"]),
        }

    @torch.no_grad()
    def __call__(self, questions: list[str], contexts: list[list[str]]) -> list[str]:
        if not questions:
            return []
        if self.fusion == "fid":
            generated = self._generate(**self._fid_inputs(questions, contexts))
        else:
            prompts = [self.prompt(q, self.context_separator.join(docs)) for q, docs in zip(questions, contexts)]
            inputs = self._encode(prompts)
            generated = self._generate(**inputs)
            if not self.is_encoder_decoder:  # drop the echoed prompt
                generated = generated[:, inputs["input_ids"].shape[1] :]
        return [text.strip() for text in self.tokenizer.batch_decode(generated, skip_special_tokens=True)]
