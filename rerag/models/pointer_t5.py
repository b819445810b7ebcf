"""T5 with a copy head (pointer-generator, See et al. 2017, eq. 8-9), for readers trained from
scratch.

A small randomly initialised T5 learns answer-type priors long before it learns to copy a span
out of its input (the embedded default's generator stayed there for thousands of steps): copying
through cross-attention needs the value/output path to carry token identities before attending
to the right token pays off. The copy head removes that chicken-and-egg problem: the final
distribution mixes the vocabulary softmax with an attention over the input tokens,

    P(w) = g * P_vocab(w) + (1 - g) * sum_{i : x_i = w} a_i,

so raising the probability of a token in the input is one attention step away. The attention
scores get a learned bonus at the position right after an occurrence of the previous output
token, so a copied multi-token span continues (CopyNet's "selective read", Gu et al. 2016).
`logits` are log P(w) (already normalized), so `generate`, beam search and cross-entropy work
unchanged. Keyword arguments beyond those `forward` names (attention outputs, decoder masks) are
accepted for `generate`'s sake and ignored.

Registered with the Auto classes as model type `pointer_t5`: `AutoConfig.for_model("pointer_t5",
...)` builds one, and exported folders load through `AutoModelForSeq2SeqLM` once `rerag.models` is
imported (every loader of the package imports it). `generate` hands the input ids to every decoding step as `source_ids` (the steps after
the first see only the cached encoder states), so callers use it like any seq2seq model's.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForSeq2SeqLM, T5Config, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput


class PointerT5Config(T5Config):
    """T5's settings plus `copy_continuation_init` (float, default 4.0): the starting score bonus
    for continuing a copied span; and `copy_loss_weight` (float, default 1.0): the weight of the
    pointer term in `loss` (see `forward`)."""

    model_type = "pointer_t5"

    def __init__(self, copy_continuation_init: float = 4.0, copy_loss_weight: float = 1.0, **kwargs):
        self.copy_continuation_init = copy_continuation_init
        self.copy_loss_weight = copy_loss_weight
        super().__init__(**kwargs)


class PointerT5ForConditionalGeneration(T5ForConditionalGeneration):
    config_class = PointerT5Config

    def __init__(self, config: PointerT5Config):
        super().__init__(config)
        d = config.d_model
        self.copy_query = nn.Linear(d, d, bias=False)
        self.copy_key = nn.Linear(d, d, bias=False)
        self.copy_gate = nn.Linear(2 * d, 1)  # g from the decoder state and the attended input
        self.post_init()
        # The continuation bonus starts at a prior that favours continuing a span; it is trained.
        self.copy_continuation = nn.Parameter(torch.tensor(float(config.copy_continuation_init)))

    def generate(self, input_ids=None, **kwargs):
        kwargs.setdefault("source_ids", input_ids if input_ids is not None else kwargs.get("inputs"))
        return super().generate(input_ids=input_ids, **kwargs)

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        decoder_input_ids=None,
        encoder_outputs=None,
        past_key_values=None,
        labels=None,
        use_cache=None,
        source_ids=None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        # transformers >= 5.24 hands generation's cache over as `cache`; without it every step decodes one token alone
        past_key_values = kwargs.pop("cache", past_key_values)
        source_ids = input_ids if input_ids is not None else source_ids
        if source_ids is None:
            raise ValueError(
                "PointerT5ForConditionalGeneration needs the input ids: pass `input_ids` "
                "(or, with `encoder_outputs`, `source_ids`)"
            )
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
        encoded = encoder_outputs.last_hidden_state
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = self._shift_right(labels)
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            encoder_hidden_states=encoded,
            encoder_attention_mask=attention_mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
        )
        decoded = decoder_outputs.last_hidden_state
        vocab_logits = self.lm_head(decoded * self.model_dim**-0.5 if self.config.scale_decoder_outputs else decoded)

        # Copy attention a over the input positions (padding masked), then scatter onto the vocabulary.
        scores = self.copy_query(decoded) @ self.copy_key(encoded).transpose(1, 2) * self.model_dim**-0.5
        follows_previous = torch.zeros_like(scores, dtype=torch.bool)  # x_{i-1} == y_{t-1}
        follows_previous[:, :, 1:] = source_ids[:, None, :-1] == decoder_input_ids[:, :, None]
        scores = scores + self.copy_continuation * follows_previous
        if attention_mask is not None:
            scores = scores.masked_fill(attention_mask[:, None, :] == 0, torch.finfo(scores.dtype).min)
        attention = scores.float().softmax(dim=-1)  # [B, T, S]
        gate = torch.sigmoid(self.copy_gate(torch.cat([decoded, attention.to(encoded.dtype) @ encoded], -1))).float()
        index = source_ids[:, None, :].expand(-1, attention.size(1), -1)
        copy = torch.zeros_like(vocab_logits, dtype=torch.float32).scatter_add_(2, index, attention)
        mixture = gate * vocab_logits.float().softmax(dim=-1) + (1 - gate) * copy
        log_probs = mixture.clamp_min(1e-30).log()  # a clamp, not +eps: log 0 would give NaN gradients

        loss = None
        if labels is not None:
            # `loss` (what a reader is pretrained on) adds -log P_copy(y_t) for every label token found
            # in the input: without it the gate learns answer-type priors from the vocabulary first
            # and closes the copy path before the attention has learned anything. The logits (and so
            # F_ij in RE-RAG) are the mixture alone.
            loss = nn.functional.nll_loss(log_probs.flatten(0, 1), labels.flatten(), ignore_index=-100)
            copy_at_label = copy.gather(2, labels.clamp_min(0)[..., None]).squeeze(-1)
            in_source = (labels != -100) & (copy_at_label > 0)
            if in_source.any():
                loss = loss - self.config.copy_loss_weight * copy_at_label[in_source].clamp_min(1e-30).log().mean()
        return Seq2SeqLMOutput(
            loss=loss,
            logits=log_probs,
            past_key_values=decoder_outputs.past_key_values,
            encoder_last_hidden_state=encoded,
        )


AutoConfig.register("pointer_t5", PointerT5Config)
AutoModelForSeq2SeqLM.register(PointerT5Config, PointerT5ForConditionalGeneration)
