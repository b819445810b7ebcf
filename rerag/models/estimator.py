"""The relevance estimator (RE): an LM that answers "true" or "false" for a (question, context)
pair (RE-RAG section 2.2, after MonoT5). An encoder-decoder answers at its first decoder step; a
decoder-only LM at the first position after its prompt (the chat template's generation prompt,
when the tokenizer has one), as yes/no LLM rerankers read two logits at the last position.

Only that first answer position matters. Training needs log p_true and log p_false under the
softmax over the whole vocabulary (eq. 3 and eq. 11), computed by `kernels`. Inference needs
only s = z_true - z_false (eq. 4), two rows of the LM head, never the [N, V] logits.

`score()` always returns the raw s. An exported folder may also hold `calibration.json` (written
by `rerag calibrate`): the maps from s to probabilities, loaded as `estimator.calibration`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

import kernels
from erag.lm import (
    adapter_scope,
    chat_affixes,
    decoder_states,
    encode_prompts,
    prefix_to_share,
    resolve,
    shares_prefix,
)
from rerag.inputs import format_pairs, window_rows
from rerag.models.calibration import CALIBRATION_FILE, Calibration
from rerag.models.folder import load_folder, save_folder
from rerag.models.lora import merged
from rerag.prompts import DEFAULT_TEMPLATE

if not hasattr(kernels, "true_false_logprobs"):  # Hugging Face's `kernels` shares the import name
    raise ImportError(
        f"`import kernels` found {kernels.__file__}, not rerag's true/false kernels: uninstall Hugging Face's "
        "`kernels` (pip uninstall kernels, then reinstall rerag); README, 'Known conflicts'"
    )

CONFIG_FILE = "rerag_estimator.json"


def single_token_id(tokenizer: PreTrainedTokenizerBase, word: str) -> int:
    """The id of `word` as the first answer token: the word must be one token there (after the
    chat template's generation prompt, when the tokenizer has one)."""
    affixes = chat_affixes(tokenizer)
    prompt_end = affixes[1] if affixes else ""
    before = tokenizer(prompt_end, add_special_tokens=False).input_ids
    ids = tokenizer(prompt_end + word, add_special_tokens=False).input_ids
    if ids[: len(before)] != before or len(ids) != len(before) + 1:
        raise ValueError(
            f"the RE's label word {word!r} must be a single token as the first answer token, got "
            f"{tokenizer.convert_ids_to_tokens(ids[len(before) :])}; choose other true_word/false_word"
        )
    return ids[-1]


def lm_head_scale(model: PreTrainedModel) -> float:
    """The factor the model applies to decoder states before its LM head (T5's tied
    embeddings rescale by d_model ** -0.5)."""
    cfg = model.config
    if cfg.model_type in {"t5", "mt5", "umt5", "longt5", "pointer_t5"}:
        if getattr(cfg, "scale_decoder_outputs", getattr(cfg, "tie_word_embeddings", False)):
            return cfg.d_model**-0.5
    return 1.0


WindowPooling = Literal["max", "mean", "first"]


def pool_windows(
    s: torch.Tensor, window_of: torch.Tensor, n_passages: int, pooling: WindowPooling = "max"
) -> torch.Tensor:
    """Each passage's s from its windows' (Dai & Callan's passage-level evidence): s [W] of windows,
    window_of [W] the passage of each, in passage order (`rerag.inputs.window_rows`; every passage
    has at least one), -> [n_passages]. `max`: the best window's (MaxP); `mean`: their mean, which
    does not grow with a passage's window count as the max of more draws does; `first`: the first
    window's (FirstP). An RE trained on windows of one length rewards, on a whole passage, what a
    longer one holds more of."""
    window_of = window_of.to(s.device)
    if pooling == "first":
        starts = torch.ones_like(window_of, dtype=torch.bool)
        starts[1:] = window_of[1:] != window_of[:-1]
        return s[starts]
    if pooling not in ("max", "mean"):
        raise ValueError(f"window pooling: max, mean or first, got {pooling!r}")
    out = torch.zeros((n_passages,), device=s.device, dtype=s.dtype)
    return out.scatter_reduce(0, window_of, s, reduce="amax" if pooling == "max" else "mean", include_self=False)


class RelevanceEstimator(nn.Module):
    """Scores contexts for a question; `RE = sigmoid(s)`, `P_RE = softmax_j(s)` (eq. 3-5).

    `share_prefix` (None: on a CPU only, `erag.lm.shares_prefix`): a decoder-only RE runs the prompt
    prefix its rows share (the chat template and the question) once (`erag.lm.decoder_states`);
    False runs every row whole (the speed benchmarks' baseline). `merge_for_scoring` (None: on a CPU
    with float32 weights only): `for_scoring` gives a copy with the LoRA adapter folded in."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        true_word: str = "true",
        false_word: str = "false",
        template: str = DEFAULT_TEMPLATE,
        max_length: int = 256,
        adapter: str | None = None,
        context_words: int | None = None,
        window_pooling: WindowPooling = "max",
    ):
        """`adapter`: the PEFT adapter of `model` that is the RE, when the model is shared with the
        generator (`erag.lm.adapter_scope`); None: the model as it is. `context_words`: `score`
        gives each passage an s from its windows of this many words, pooled by `window_pooling`
        (`pool_windows`; `rerag export` sets the run's `data.init_args.eval_context_words` and
        `model.evaluation.window_pooling`); None: whole passages."""
        super().__init__()
        if context_words is not None and context_words < 2:
            raise ValueError(f"context_words: must be at least 2 (or None: whole passages), got {context_words}")
        self.model, self.tokenizer, self.adapter = model, tokenizer, adapter
        self.true_word, self.false_word = true_word, false_word
        self.template, self.max_length, self.context_words = template, max_length, context_words
        self.window_pooling = window_pooling
        self.true_id = single_token_id(tokenizer, true_word)
        self.false_id = single_token_id(tokenizer, false_word)
        self.calibration: Calibration | None = None  # set by from_pretrained or `rerag calibrate`
        self.share_prefix: bool | None = None
        self.merge_for_scoring: bool | None = None

    def for_scoring(self) -> RelevanceEstimator:
        """The RE to score with while its weights stay fixed (an evaluation epoch): this one, or, where
        `merge_for_scoring` says so, a copy whose LoRA adapter is folded into a copy of the base
        weights (`rerag.models.lora.merged`), which scores alike and runs no low-rank matmuls. Auto
        (None) merges on a CPU where the weights are float32: there the merge is exact to float32
        rounding, and it saves the many small low-rank matmuls of an adapter on every linear layer
        (420 per forward pass on SmolLM2), which a CPU runs poorly; in bf16 the merge would round the
        adapter's update. The copy does not follow later training: make a new one."""
        params = list(self.model.parameters())
        auto = params[0].device.type == "cpu" and all(p.dtype == torch.float32 for p in params)
        merge = auto if self.merge_for_scoring is None else self.merge_for_scoring
        if not merge or not hasattr(self.model, "peft_config"):
            return self
        copy = RelevanceEstimator(
            merged(self.model, self.adapter, shared=True).requires_grad_(False).eval(),
            self.tokenizer,
            self.true_word,
            self.false_word,
            self.template,
            self.max_length,
            None,
            self.context_words,
            self.window_pooling,
        )
        copy.share_prefix, copy.calibration = self.share_prefix, self.calibration
        return copy

    def encode(self, questions: list[str], contexts: list[dict | str]) -> dict[str, torch.Tensor]:
        """Tokenize (question, context) pairs with the input template (`erag.lm.encode_prompts`,
        right-padded)."""
        return encode_prompts(self.tokenizer, format_pairs(self.template, questions, contexts), self.max_length)

    def first_step_hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The state the LM head reads for the first answer token, before the scale: [N, d]. An
        encoder-decoder's first decoder step; a decoder-only model's last prompt token."""
        with adapter_scope(self.model, self.adapter):
            if not self.model.config.is_encoder_decoder:
                prefix = prefix_to_share(input_ids, attention_mask, self.share_prefix)
                hidden, prefix = decoder_states(self.model.get_decoder(), input_ids, attention_mask, prefix)
                end = attention_mask.shape[1] - 1 - attention_mask.flip(1).argmax(dim=1)  # either padding side
                last = end - prefix  # `hidden` starts after the prefix
                return hidden[torch.arange(len(hidden), device=hidden.device), last]
            encoder_out = self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
            start = torch.full(
                (input_ids.shape[0], 1),
                self.model.config.decoder_start_token_id,
                dtype=torch.long,
                device=input_ids.device,
            )
            decoder_out = self.model.get_decoder()(
                input_ids=start,
                encoder_hidden_states=encoder_out.last_hidden_state,
                encoder_attention_mask=attention_mask,
            )
            return decoder_out.last_hidden_state[:, 0]

    def true_false_logprobs(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, backend: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """log p_true, log p_false under the full-vocabulary softmax (float32, [N]).

        On CUDA the fused kernel reads the LM-head weight in chunks and never builds the
        [N, V] logits; elsewhere the logits go through the eager reference."""
        hidden = self.first_step_hidden(input_ids, attention_mask)
        weight = self.model.get_output_embeddings().weight
        bias = getattr(self.model, "final_logits_bias", None)
        scale = lm_head_scale(self.model)
        if hidden.is_cuda and bias is None and backend != "reference":
            return kernels.fused_true_false_logprobs(
                hidden, weight, self.true_id, self.false_id, scale=scale, backend=backend
            )
        with torch.autocast(hidden.device.type, enabled=False):  # the head in float32, as `forward` reads it
            logits = nn.functional.linear(hidden.float() * scale, weight.float())
        if bias is not None:
            logits = logits + bias.view(-1)
        return kernels.true_false_logprobs(logits, self.true_id, self.false_id, backend=backend)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """s = z_true - z_false (eq. 4) from two LM-head rows: [N] float32."""
        hidden = self.first_step_hidden(input_ids, attention_mask).float()
        weight = self.model.get_output_embeddings().weight
        # the rows' difference in float32: a bf16 base would round it
        row = (weight[self.true_id].float() - weight[self.false_id].float()) * lm_head_scale(self.model)
        with torch.autocast(hidden.device.type, enabled=False):  # under bf16 autocast s would round to ~0.03
            s = hidden @ row
        bias = getattr(self.model, "final_logits_bias", None)
        if bias is not None:
            s = s + (bias.view(-1)[self.true_id] - bias.view(-1)[self.false_id]).float()
        return s

    def score_rows(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        batch_size: int = 64,
        groups: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """s for many tokenized rows, `batch_size` rows per forward pass, in length-sorted chunks:
        each chunk is cut to its own longest row, so short contexts do not pay for long ones'
        padding. `groups` [N] (e.g. each row's question): where the RE shares prompt prefixes
        (`erag.lm.shares_prefix`), a chunk holds rows of one group only, so a decoder-only RE reads
        their shared prefix once (`erag.lm.decoder_states`).
        Returns [N] float32 in the rows' order."""
        lengths = attention_mask.sum(dim=1)
        order = torch.argsort(lengths, descending=True, stable=True)
        if groups is None or not shares_prefix(self.share_prefix, input_ids.device):
            chunks = torch.split(order, batch_size)
        else:
            groups = groups.to(order.device)
            order = order[torch.argsort(groups[order], stable=True)]  # by group, then length
            sizes = torch.unique_consecutive(groups[order], return_counts=True)[1]
            chunks = [c for g in torch.split(order, sizes.tolist()) for c in torch.split(g, batch_size)]
        out = torch.empty(len(order), device=input_ids.device)
        for rows in chunks:  # rows are right-padded (`encode`)
            width = int(lengths[rows].max())
            out[rows] = self(input_ids[rows, :width], attention_mask[rows, :width]).float()  # autocast may give bf16
        return out

    @torch.no_grad()
    def score(self, question: str, passages: list[dict | str], batch_size: int = 64) -> torch.Tensor:
        """Log-odds s for each passage of one question (length-bucketed, see `score_rows`; with
        `context_words`, each passage's windows pooled). `estimator.score` is a reranker:
        `(question, passages) -> scores`, as `eor`'s @RR op takes."""
        return self.predict([(question, p) for p in passages], batch_size)

    @torch.no_grad()
    def predict(self, pairs: list[tuple[str, dict | str]], batch_size: int = 64) -> torch.Tensor:
        """Log-odds s for (question, passage) pairs of any questions, as sentence-transformers'
        `CrossEncoder.predict` scores pairs: [N] float32 in the pairs' order, in length-sorted
        batches of `batch_size` (`score_rows`); with `context_words`, each passage's windows pooled
        by `window_pooling` (`pool_windows`)."""
        if not pairs:
            return torch.empty(0)
        questions, passages = (list(x) for x in zip(*pairs))
        if self.context_words:
            passages, window_of = window_rows(passages, self.context_words)
            questions = [questions[j] for j in window_of]
        device = next(self.parameters()).device
        enc = {k: v.to(device) for k, v in self.encode(questions, passages).items()}
        index = {q: i for i, q in enumerate(dict.fromkeys(questions))}
        groups = torch.tensor([index[q] for q in questions])
        s = self.score_rows(enc["input_ids"], enc["attention_mask"], batch_size, groups)
        if not self.context_words:
            return s
        return pool_windows(s, torch.tensor(window_of), len(pairs), self.window_pooling)

    def rank(
        self, question: str, passages: list[dict | str], top_k: int | None = None, batch_size: int = 64
    ) -> list[dict]:
        """The passages best first, as `CrossEncoder.rank` gives them: `{"corpus_id": index in
        passages, "score": s}` for the `top_k` best (None: all)."""
        scores = self.score(question, passages, batch_size)
        order = torch.argsort(scores, descending=True, stable=True)[:top_k]
        return [{"corpus_id": int(i), "score": float(scores[i])} for i in order]

    def save_pretrained(self, directory: str | Path) -> None:
        """Write the model (safetensors, or only its LoRA adapters when it has them), its
        tokenizer, `rerag_estimator.json` and its calibration when it has one. A `calibration.json`
        already in the folder is removed otherwise: it was fitted on another model's scores."""
        save_folder(
            directory,
            self.model,
            self.tokenizer,
            CONFIG_FILE,
            {
                "true_word": self.true_word,
                "false_word": self.false_word,
                "template": self.template,
                "max_length": self.max_length,
                "context_words": self.context_words,
                "window_pooling": self.window_pooling,
            },
            self.adapter,
        )
        if self.calibration is not None:
            self.calibration.save(directory)
        else:
            (Path(directory) / CALIBRATION_FILE).unlink(missing_ok=True)

    @classmethod
    def from_pretrained(cls, directory: str | Path, trust_remote_code: bool = False, **overrides) -> RelevanceEstimator:
        """Load what `save_pretrained` wrote, with its calibration when the folder has one
        (else `calibration` is None); no Lightning needed, no code run from files."""
        model, tokenizer, settings = load_folder(directory, CONFIG_FILE, trust_remote_code)
        estimator = cls(model, tokenizer, **{**settings, **overrides})
        estimator.calibration = Calibration.load(resolve(str(directory)))
        return estimator
