"""Readers: callables `(questions: list[str], contexts: list[list[str]]) -> list[str]`, the door
between `rerag`, `eor` and `erag` (DESIGN.md, "The door between packages: readers").

A language model is wrapped once, as an LM with a default prompt `template`, `format(text)` (the
model's input for a prompt) and two batched methods: `generate(prompts)` -> answers and their
log-likelihoods, `loglik(prompts, answers)` -> log P(answer | prompt):
- `Seq2SeqLM` wraps a `Generator`: the trained RE-RAG generator (its own input template) or any
  Hugging Face encoder-decoder (`Seq2SeqLM.from_pretrained`);
- `CausalLM` wraps any `AutoModelForCausalLM`, through its chat template when the tokenizer has one.
Readers use an LM:
- `RAGReader`, mode "rag": one prompt per context, answers marginalized with context weights
  P(j) = softmax_j(w_j) (eq. 6): "fast" (each answer scored under its own context) or "thorough"
  (every candidate under every context). The weights are given (the RE's log-odds s, so
  P = P_RE of eq. 5), or come from a reranker `(question, passages) -> scores` such as
  `RelevanceEstimator.score`, or are uniform. Mode "ralm": the contexts joined into one prompt.
- `ParametricReader`: the LM alone, no context (the mixed strategy's fallback, Table 5).

The trained RE-RAG pair as a reader: `RAGReader(Seq2SeqLM(generator), reranker=estimator.score)`.
Contexts may be strings or FiD context dicts (`{"title", "text", ...}`). Templates are filled with
`{question}`, `{title}`, `{text}` and `{context}` (the title, a newline, the text). Every question
must be non-empty and, for `RAGReader`, have at least one context (ValueError otherwise); there is
no top-k here: a reader reads every context it is given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Protocol

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel

from rerag.decoding import marginalize_answers, thorough_marginalize, unique_answers
from rerag.models.generator import Generator
from rerag.models.loading import load_tokenizer, resolve

Context = str | dict
Reader = Callable[[list[str], list[list[Context]]], list[str]]
Reranker = Callable[[str, list[Context]], torch.Tensor]

LLM_TEMPLATE = ("Answer the question with a short phrase from the context.\n\n"
                "Context:\n{context}\n\nQuestion: {question}")
CLOSED_BOOK_TEMPLATE = "Answer the question with a short phrase.\n\nQuestion: {question}"


def passage_text(context: Context) -> str:
    """A context as one string: its title, a newline, its text (or the string itself)."""
    if isinstance(context, str):
        return context
    title = context.get("title", "")
    return f"{title}\n{context['text']}" if title else context["text"]


def fill(template: str, question: str, context: Context | None = None) -> str:
    """Fill `{question}`, `{title}`, `{text}` and `{context}`; fields a template lacks are ignored."""
    c = {"title": "", "text": ""} if context is None else context
    c = c if isinstance(c, dict) else {"title": "", "text": c}
    return template.format(question=question, title=c.get("title", ""), text=c["text"], context=passage_text(c))


def check_inputs(questions: list[str], contexts: list[list[Context]] | None, need_contexts: bool) -> None:
    """Readers fail loudly on inputs they cannot answer from, naming the question."""
    if contexts is not None and len(contexts) != len(questions):
        raise ValueError(f"got {len(questions)} questions but {len(contexts)} context lists")
    for i, question in enumerate(questions):
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"question {i} is empty")
        if need_contexts and not contexts[i]:
            raise ValueError(f"question {i} ({question!r}) has no contexts; a ParametricReader answers without any")


def _batches(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


class LM(Protocol):
    template: str

    def to(self, device: str | torch.device) -> "LM": ...
    def format(self, text: str) -> str: ...
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]: ...
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor: ...


class Seq2SeqLM:
    """An encoder-decoder LM, through `Generator.generate` and `Generator.answer_loglik`.
    Inputs are truncated to `generator.max_length` tokens, answers to `max_answer_length`."""

    def __init__(self, generator: Generator, batch_size: int = 32):
        self.generator, self.batch_size = generator, batch_size
        self.template = generator.template

    @classmethod
    def from_pretrained(cls, name_or_path: str, template: str = LLM_TEMPLATE, max_answer_length: int = 16,
                        max_length: int = 512, trust_remote_code: bool = False, batch_size: int = 32,
                        **model_kwargs) -> "Seq2SeqLM":
        """Any Hugging Face encoder-decoder (e.g. a Flan-T5 folder) with a prompt template."""
        model = AutoModelForSeq2SeqLM.from_pretrained(resolve(name_or_path), trust_remote_code=trust_remote_code,
                                                      **model_kwargs).eval()
        tokenizer = load_tokenizer(name_or_path, trust_remote_code)
        return cls(Generator(model, tokenizer, max_answer_length, template, max_length), batch_size)

    def to(self, device: str | torch.device) -> "Seq2SeqLM":
        self.generator.to(device)
        return self

    def format(self, text: str) -> str:
        return text

    def _encode(self, prompts: list[str]) -> dict[str, torch.Tensor]:
        g = self.generator
        enc = g.tokenizer(prompts, max_length=g.max_length, truncation=True, padding=True, return_tensors="pt")
        return {k: enc[k].to(_device(g)) for k in ("input_ids", "attention_mask")}

    @torch.no_grad()
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
        texts, loglik = [], []
        for chunk in _batches(prompts, self.batch_size):
            t, ll = self.generator.generate(**self._encode(chunk), num_beams=num_beams)
            texts += t
            loglik.append(ll.cpu())
        return texts, torch.cat(loglik) if loglik else torch.empty(0)

    @torch.no_grad()
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor:
        out = []
        for start in range(0, len(prompts), self.batch_size):
            enc = self._encode(prompts[start : start + self.batch_size])
            labels = self.generator.encode_answers(answers[start : start + self.batch_size]).to(enc["input_ids"].device)
            out.append(self.generator.answer_loglik(enc["input_ids"], enc["attention_mask"], labels).cpu())
        return torch.cat(out) if out else torch.empty(0)


class CausalLM:
    """A decoder-only LM. A prompt becomes one user message of the tokenizer's chat template
    (with the generation prompt) when it has one, else stays plain text. Prompts are not
    truncated: keep the contexts within the model's window."""

    def __init__(self, model: PreTrainedModel, tokenizer, template: str = LLM_TEMPLATE,
                 max_new_tokens: int = 16, batch_size: int = 8):
        if tokenizer.pad_token is None:  # batching needs a pad id; the attention mask hides it
            tokenizer.pad_token = tokenizer.eos_token
        self.model, self.tokenizer, self.template = model, tokenizer, template
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size

    @classmethod
    def from_pretrained(cls, name_or_path: str, trust_remote_code: bool = False, gguf_file: str | None = None,
                        model_kwargs: dict | None = None, **kwargs) -> "CausalLM":
        """Load a causal LM folder or name (`gguf_file` for a GGUF checkpoint inside it)."""
        path = resolve(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=trust_remote_code, gguf_file=gguf_file,
                                                     **(model_kwargs or {})).eval()
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, gguf_file=gguf_file)
        return cls(model, tokenizer, **kwargs)

    def to(self, device: str | torch.device) -> "CausalLM":
        self.model.to(device)
        return self

    def format(self, text: str) -> str:
        if self.tokenizer.chat_template is None:
            return text
        return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)

    def _prompt_ids(self, prompts: list[str]) -> list[list[int]]:
        # A chat template writes its own special tokens (BOS and the like); plain text gets the usual ones.
        return self.tokenizer(prompts, add_special_tokens=self.tokenizer.chat_template is None).input_ids

    def _pad(self, rows: list[list[int]], side: str) -> dict[str, torch.Tensor]:
        enc = self.tokenizer.pad({"input_ids": rows}, padding_side=side, return_tensors="pt")
        return {k: enc[k].to(_device(self.model)) for k in ("input_ids", "attention_mask")}

    @torch.no_grad()
    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
        texts = []
        for chunk in _batches(prompts, self.batch_size):
            inputs = self._pad(self._prompt_ids(chunk), "left")  # left padding: every row continues at the end
            out = self.model.generate(**inputs, do_sample=False, num_beams=num_beams,
                                      max_new_tokens=self.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id)
            new = out[:, inputs["input_ids"].shape[1] :]
            texts += [t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
        return texts, self.loglik(prompts, texts)

    @torch.no_grad()
    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor:
        """log P(answer, EOS | prompt) summed over tokens: the EOS makes it a complete answer, as
        the seq2seq generator's labels end with one."""
        eos, out = self.tokenizer.eos_token_id, []
        for start in range(0, len(prompts), self.batch_size):
            prompt_ids = self._prompt_ids(prompts[start : start + self.batch_size])
            answer_ids = self.tokenizer(answers[start : start + self.batch_size], add_special_tokens=False).input_ids
            inputs = self._pad([p + a + [eos] for p, a in zip(prompt_ids, answer_ids)], "right")
            labels = torch.full_like(inputs["input_ids"], -100)
            for row, (p, a) in enumerate(zip(prompt_ids, answer_ids)):
                labels[row, len(p) : len(p) + len(a) + 1] = inputs["input_ids"][row, len(p) : len(p) + len(a) + 1]
            logits = self.model(**inputs).logits[:, :-1].float()  # position t predicts token t + 1
            token_ll = -nn.functional.cross_entropy(logits.transpose(1, 2), labels[:, 1:], ignore_index=-100,
                                                    reduction="none")
            out.append(token_ll.sum(dim=1).cpu())
        return torch.cat(out) if out else torch.empty(0)


def load_lm(name_or_path: str, trust_remote_code: bool = False, gguf_file: str | None = None, **kwargs) -> LM:
    """A Hugging Face folder or name as `Seq2SeqLM` or `CausalLM`, read from its config."""
    config = AutoConfig.from_pretrained(resolve(name_or_path), trust_remote_code=trust_remote_code, gguf_file=gguf_file)
    if config.is_encoder_decoder:
        return Seq2SeqLM.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, **kwargs)
    return CausalLM.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, gguf_file=gguf_file, **kwargs)


@dataclass
class Answer:
    text: str
    logprob: float  # rag: log P(y | q, C) of eq. 6; ralm and parametric: log P(y | prompt)


class RAGReader:
    """Answers from contexts with an LM; see the module docstring for modes and weights.

    Args:
        lm: a `Seq2SeqLM` or `CausalLM`.
        mode: "rag" (per-context generation, marginalized) or "ralm" (contexts in one prompt).
        marginalization: "fast" or "thorough" (mode "rag" only).
        template: the prompt; None takes the LM's.
        num_beams: beams per generation (1 = greedy).
        reranker: weights for `__call__` and for `answer` without weights; None = uniform.
        separator: joins contexts in mode "ralm".
    """

    def __init__(self, lm: LM, mode: Literal["rag", "ralm"] = "rag",
                 marginalization: Literal["fast", "thorough"] = "fast", template: str | None = None,
                 num_beams: int = 1, reranker: Reranker | None = None, separator: str = "\n\n"):
        if mode not in ("rag", "ralm"):
            raise ValueError(f"mode must be 'rag' or 'ralm', got {mode!r}")
        if marginalization not in ("fast", "thorough"):
            raise ValueError(f"marginalization must be 'fast' or 'thorough', got {marginalization!r}")
        self.lm, self.mode, self.marginalization = lm, mode, marginalization
        self.template = lm.template if template is None else template
        self.num_beams, self.reranker, self.separator = num_beams, reranker, separator

    def __call__(self, questions: list[str], contexts: list[list[Context]]) -> list[str]:
        return [a.text for a in self.answer(questions, contexts)]

    def prompt(self, question: str, context: Context) -> str:
        return self.lm.format(fill(self.template, question, context))

    def _weights(self, question: str, contexts: list[Context]) -> torch.Tensor:
        return torch.zeros(len(contexts)) if self.reranker is None else self.reranker(question, contexts)

    def answer(self, questions: list[str], contexts: list[list[Context]],
               weights: list[torch.Tensor] | None = None) -> list[Answer]:
        """One answer per question. `weights[i][j]` are logits over question i's contexts (the RE's
        log-odds s: P = P_RE, eq. 5); None asks the reranker, or weighs contexts equally."""
        check_inputs(questions, contexts, need_contexts=True)
        if self.mode == "ralm":
            joined = [self.separator.join(passage_text(c) for c in cs) for cs in contexts]
            texts, loglik = self.lm.generate([self.prompt(q, j) for q, j in zip(questions, joined)], self.num_beams)
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
        texts, loglik = self.lm.generate([self.lm.format(fill(self.template, q)) for q in questions], self.num_beams)
        return [Answer(t, ll.item()) for t, ll in zip(texts, loglik)]
