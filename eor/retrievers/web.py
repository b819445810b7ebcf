"""A web search engine behind an HTTP JSON API (the paper's SE used Google via serper.dev)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from eor.corpus import Passage
from eor.retrievers.base import BaseRetriever


class WebSearchRetriever(BaseRetriever):
    """Sends each question to `endpoint` and turns the JSON results into ranked passages.

    GET puts the question in the URL's `query_param` (plus `params`); POST sends them as a JSON
    body (serper.dev style). `results_path` is the dotted path to the result list in the response
    (``"organic"`` for serper.dev, ``"data.items"`` for nested ones). Each result gives the passage
    `text_field` (required), `title_field` and `id_field` (optional). Passages keep the engine's
    order, scored 1/rank. `headers` carries API keys.
    """

    def __init__(
        self,
        endpoint: str,
        name: str = "SE",
        query_param: str = "q",
        results_path: str = "organic",
        text_field: str = "snippet",
        title_field: str = "title",
        id_field: str = "link",
        k: int = 10,
        method: Literal["GET", "POST"] = "GET",
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ):
        super().__init__(name)
        if method not in ("GET", "POST"):
            raise ValueError(f"method must be 'GET' or 'POST', got {method!r}")
        self.endpoint = endpoint
        self.query_param = query_param
        self.results_path = results_path
        self.text_field = text_field
        self.title_field = title_field
        self.id_field = id_field
        self.k = k
        self.method = method
        self.params = dict(params or {})
        self.headers = dict(headers or {})
        self.timeout = timeout

    def retrieve(self, questions: Sequence[str]) -> list[list[Passage]]:
        return [self._search(q) for q in questions]

    def _search(self, question: str) -> list[Passage]:
        query = {self.query_param: question, **self.params}
        if self.method == "GET":
            separator = "&" if "?" in self.endpoint else "?"
            request = urllib.request.Request(
                self.endpoint + separator + urllib.parse.urlencode(query), headers=self.headers
            )
        else:
            headers = {"Content-Type": "application/json", **self.headers}
            request = urllib.request.Request(self.endpoint, json.dumps(query).encode(), headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            payload = json.load(response)
        results: Any = payload
        for key in self.results_path.split(".") if self.results_path else []:
            if not isinstance(results, dict) or key not in results:
                raise ValueError(f"{self.endpoint}: response has no {key!r} on results path {self.results_path!r}")
            results = results[key]
        if not isinstance(results, list):
            raise ValueError(f"{self.endpoint}: results path {self.results_path!r} is not a list")
        passages = []
        for rank, result in enumerate(results[: self.k], start=1):
            if not isinstance(result, dict) or not isinstance(result.get(self.text_field), str):
                raise ValueError(f"{self.endpoint}: result {rank} has no string field {self.text_field!r}")
            passage_id = str(result.get(self.id_field, f"{self.name}:{rank}"))
            passages.append(
                Passage(passage_id, str(result.get(self.title_field, "")), result[self.text_field], 1.0 / rank)
            )
        return passages
