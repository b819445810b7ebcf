"""The answer generator: an LM that reads one context at a time (RAG-sequence), an
encoder-decoder or a decoder-only model.

`answer_loglik` gives F_ij = log P_G(a_i | q_i, c_j) (eq. 8), the summed token log-likelihood
of an answer and its closing EOS; `generate` writes one answer per (question, context) pair.
Both are `erag.lm`'s, which readers use too.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from erag.lm import CausalLM, Seq2SeqLM, adapter_scope, answer_loglik, encode_answers, generate_answers, lm_for
from rerag.models.folder import load_folder, save_folder
from rerag.prompts import DEFAULT_TEMPLATE

CONFIG_FILE = "rerag_generator.json"


class Generator(nn.Module):
    """`template` and `max_length` describe the input text the generator was trained on (the
    datamodule's `generator_template` and `generator_max_length`); exports and readers use them.
    `adapter` names the PEFT adapter of `model` that is the generator when the model is shared with
    the RE (`erag.lm.adapter_scope`; `BASE_ADAPTER`: the shared base with adapters off).
    `share_prefix` (None: on a CPU only, `erag.lm.shares_prefix`): a decoder-only generator runs the
    prompt prefix its rows share once (`erag.lm.decoder_states`); False runs every row whole (the
    speed benchmarks' baseline)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_answer_length: int = 16,
        template: str = DEFAULT_TEMPLATE,
        max_length: int = 256,
        adapter: str | None = None,
    ):
        super().__init__()
        self.model, self.tokenizer, self.adapter = model, tokenizer, adapter
        self.max_answer_length = max_answer_length
        self.template, self.max_length = template, max_length
        self.share_prefix: bool | None = None

    def encode_answers(self, answers: list[str]) -> torch.Tensor:
        """Answer token ids and EOS as labels (at most `max_answer_length`), padding set to -100."""
        return encode_answers(self.tokenizer, answers, self.max_answer_length)

    def answer_loglik(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        """F = sum_t log P_G(a_t | a_<t, q, c) for each row, EOS included (eq. 8): [N] float32."""
        with adapter_scope(self.model, self.adapter):
            return answer_loglik(self.model, input_ids, attention_mask, labels, self.share_prefix)

    def generate(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, num_beams: int = 1
    ) -> tuple[list[str], torch.Tensor]:
        """One answer per right-padded row and its log-likelihood log P_G(y | q, c) (teacher-forced)."""
        with adapter_scope(self.model, self.adapter):
            return generate_answers(
                self.model, self.tokenizer, input_ids, attention_mask, self.max_answer_length, num_beams
            )

    def as_lm(self, batch_size: int = 32) -> Seq2SeqLM | CausalLM:
        """This generator as the LM that readers use (`erag.lm`): its template, input and answer
        lengths, its adapter."""
        return lm_for(
            self.model,
            self.tokenizer,
            template=self.template,
            max_length=self.max_length,
            max_new_tokens=self.max_answer_length,
            batch_size=batch_size,
            adapter=self.adapter,
        )

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the model (safetensors, or only its LoRA adapter when it has one), its
        tokenizer and `rerag_generator.json`."""
        save_folder(
            directory,
            self.model,
            self.tokenizer,
            CONFIG_FILE,
            {
                "max_answer_length": self.max_answer_length,
                "template": self.template,
                "max_length": self.max_length,
            },
            self.adapter,
        )

    @classmethod
    def from_pretrained(cls, directory: str | Path, trust_remote_code: bool = False, **overrides) -> Generator:
        """Load what `save_pretrained` wrote; no Lightning needed, no code run from files."""
        model, tokenizer, settings = load_folder(directory, CONFIG_FILE, trust_remote_code)
        return cls(model, tokenizer, **{**settings, **overrides})
