"""An LM served over HTTP: the `erag.lm.LM` contract backed by an OpenAI-compatible endpoint
(vLLM, TGI, llama.cpp's server, OpenAI itself), selected with `--llm served` and `--served.*`.

`ServedLM.generate` sends one greedy request per prompt (temperature 0), at most `concurrency` in
flight, and returns the answers in the prompts' order. Failed attempts are retried by urllib3's
`Retry` on a `requests` adapter: 429 and 5xx answers (waiting a `Retry-After` header where the
server sends one, else an exponential backoff), timeouts and dropped connections. Any other 4xx
(a wrong model name, a bad key) fails at once with one line naming the status, the URL and the
server's message.

A server gives answers, not the log-likelihood of a given answer: `generate`'s log-likelihoods are
NaN and `loglik` refuses, so readers that weigh answers by their likelihoods (RE-RAG's per-context
marginalization, FiD-like fusion) refuse a served LM (`gives_likelihoods` is False); reading the
contexts in one prompt (RALM) and retrieval-free reading work.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests
import torch
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from erag.prompts import LM_READER_PROMPT

#: The `--llm` value that selects the served LM configured by `--served.*`.
SERVED = "served"

#: Statuses retried (with the server's Retry-After where it sends one): rate limits and server errors.
RETRIED_STATUSES = (429, 500, 502, 503, 504)

#: How every refusal of a likelihood-based path begins.
NO_LIKELIHOODS = "a served reader gives no log-likelihoods (an OpenAI-compatible server returns answers only)"


class ServedError(RuntimeError):
    """A served LM's request failed: one line with the status (or the error), the URL and the server's message."""


@dataclass(frozen=True)
class ServedConfig:
    """An OpenAI-compatible endpoint that reads (`--llm served`); the API key is never a setting.

    Args:
        base_url: the API root, e.g. http://localhost:8000/v1 (requests go to its /chat/completions or /completions).
        model: the served model's name, as the server lists it (its /models).
        api_key_env: the name of the environment variable holding the API key; unset: no Authorization header.
        max_new_tokens: the longest answer, in tokens (the request's max_tokens).
        concurrency: requests in flight at most.
        timeout: seconds to wait for a connection and for an answer, per attempt.
        retries: attempts after the first, on 429, 5xx, a timeout or a dropped connection.
        backoff: urllib3's backoff factor: the n-th retry without a Retry-After waits backoff * 2^(n-1) seconds.
        chat: true: /chat/completions with the prompt as one user message; false: /completions with the raw prompt.
    """

    base_url: str = ""
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    max_new_tokens: int = 32
    concurrency: int = 8
    timeout: float = 60.0
    retries: int = 3
    backoff: float = 0.5
    chat: bool = True

    def check(self) -> None:
        """One-line ValueErrors for settings no request could go out with."""
        if not self.base_url or not self.model:
            raise ValueError("--llm served needs --served.base_url (e.g. http://localhost:8000/v1) and --served.model")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"served.base_url must start with http:// or https://, got {self.base_url!r}")
        for name in ("max_new_tokens", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"served.{name} must be at least 1, got {getattr(self, name)}")
        if self.timeout <= 0 or self.retries < 0 or self.backoff < 0:
            raise ValueError("served.timeout must be positive, served.retries and served.backoff at least 0")


def server_message(response: requests.Response) -> str:
    """The server's error text on one line: OpenAI's `{"error": {"message": ...}}`, or the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body.get("message", body.get("detail")))
        if isinstance(error, dict):
            error = error.get("message", error)
        text = str(error) if error is not None else response.text
    else:
        text = response.text
    return " ".join(text.split())[:500] or response.reason or "no message"


class ServedLM:
    """The `erag.lm.LM` contract over an OpenAI-compatible endpoint (`ServedConfig`): greedy answers,
    no likelihoods. `model` is the served model's name; `template` the readers' default prompt."""

    gives_likelihoods = False

    def __init__(self, config: ServedConfig, template: str = LM_READER_PROMPT):
        config.check()
        self.config, self.template, self.model = config, template, config.model
        self.url = config.base_url.rstrip("/") + ("/chat/completions" if config.chat else "/completions")
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"ServedLM({self.config.model!r} at {self.config.base_url})"

    def to(self, device: str | torch.device) -> ServedLM:
        """Nothing to move: the model runs on the server."""
        return self

    def _session(self) -> requests.Session:
        """One session per thread (a `requests.Session` is not promised to be thread-safe), retrying
        through urllib3 (`RETRIED_STATUSES`, Retry-After, timeouts, dropped connections)."""
        session = getattr(self._local, "session", None)
        if session is None:
            c = self.config
            retry = Retry(
                total=c.retries,
                connect=c.retries,
                read=c.retries,
                status=c.retries,
                backoff_factor=c.backoff,
                status_forcelist=RETRIED_STATUSES,
                allowed_methods=frozenset({"POST"}),
                respect_retry_after_header=True,
                raise_on_status=False,  # the last answer comes back: its status and message are reported
            )
            session = requests.Session()
            session.mount("http://", HTTPAdapter(max_retries=retry))
            session.mount("https://", HTTPAdapter(max_retries=retry))
            key = os.environ.get(c.api_key_env) if c.api_key_env else None
            if key:
                session.headers["Authorization"] = f"Bearer {key}"
            self._local.session = session
        return session

    def payload(self, prompt: str) -> dict:
        """The request body: greedy (temperature 0), at most `max_new_tokens` tokens."""
        c = self.config
        body = {"model": c.model, "max_tokens": c.max_new_tokens, "temperature": 0, "n": 1}
        if c.chat:
            return {**body, "messages": [{"role": "user", "content": prompt}]}
        return {**body, "prompt": prompt}

    def complete(self, prompt: str) -> str:
        """The server's answer to one prompt, stripped."""
        try:
            response = self._session().post(self.url, json=self.payload(prompt), timeout=self.config.timeout)
        except requests.RequestException as e:  # retries exhausted on timeouts or connection errors
            cause = " ".join(str(e).split())[:300]
            raise ServedError(
                f"no answer from {self.url} after {self.config.retries} retries: {type(e).__name__}: {cause}"
            ) from None
        if response.status_code >= 400:
            after = f" after {self.config.retries} retries" if response.status_code in RETRIED_STATUSES else ""
            raise ServedError(f"{response.status_code} from {self.url}{after}: {server_message(response)}")
        try:
            choice = response.json()["choices"][0]
            text = choice["message"]["content"] if self.config.chat else choice["text"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ServedError(f"{self.url} answered without choices: {response.text[:300]!r}") from None
        return (text or "").strip()

    def generate(self, prompts: list[str], num_beams: int = 1) -> tuple[list[str], torch.Tensor]:
        """One greedy answer per prompt, in the prompts' order, and NaN log-likelihoods (none served)."""
        if num_beams != 1:
            raise ValueError(f"a served reader decodes greedily: num_beams={num_beams} needs an in-process --llm")
        if not prompts:
            return [], torch.empty(0)
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(prompts))) as pool:
            texts = list(pool.map(self.complete, prompts))  # map keeps the prompts' order
        return texts, torch.full((len(prompts),), float("nan"))

    def loglik(self, prompts: list[str], answers: list[str]) -> torch.Tensor:
        raise ValueError(f"{NO_LIKELIHOODS}: scoring given answers needs them; use an in-process --llm")


def served_lm(llm: str | None, config: ServedConfig) -> ServedLM | None:
    """The `ServedLM` of `--llm served`; None for any other `llm`, where `--served.*` must be left unset."""
    if llm == SERVED:
        return ServedLM(config)
    if config != ServedConfig():
        raise ValueError(f"--served.* options are given but --llm is {llm!r}: add --llm {SERVED} to read with them")
    return None
