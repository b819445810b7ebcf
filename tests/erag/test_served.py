"""`erag.served.ServedLM` against a local fake OpenAI-compatible server (offline)."""

import json
import re
import threading
import time
from dataclasses import fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from erag.served import ServedConfig, ServedError, ServedLM, served_lm


class FakeOpenAI:
    """What the fake server answers: `faults` (status, headers, body) are answered first, one per
    request; then `answer(prompt)`, after `delay(prompt)` seconds. Every request is kept."""

    def __init__(self):
        self.requests, self.faults, self.lock = [], [], threading.Lock()
        self.answer = lambda prompt: f"re: {prompt}"
        self.delay = lambda prompt: 0.0


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: dict, headers: dict | None = None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        fake: FakeOpenAI = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with fake.lock:
            fake.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": body, "at": time.monotonic()}
            )
            fault = fake.faults.pop(0) if fake.faults else None
        if fault is not None:
            status, headers, error = fault
            if status == 0:  # a hang: the client times out
                time.sleep(headers["sleep"])
                return
            return self._send(status, error, headers)
        chat = self.path.endswith("/chat/completions")
        prompt = body["messages"][0]["content"] if chat else body["prompt"]
        time.sleep(fake.delay(prompt))
        text = fake.answer(prompt)
        choice = {"index": 0, "message": {"role": "assistant", "content": text}} if chat else {"index": 0, "text": text}
        self._send(200, {"id": "x", "object": "chat.completion", "choices": [choice]})


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a client that timed out closed the socket
        pass


@pytest.fixture
def server():
    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.fake = FakeOpenAI()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield httpd.fake
    httpd.shutdown()
    httpd.server_close()


def config(fake, **kwargs) -> ServedConfig:
    return ServedConfig(**{"base_url": fake.base_url, "model": "fake-model", "backoff": 0.01, **kwargs})


def test_answers_come_back_in_the_prompts_order_under_concurrency(server):
    prompts = [f"q{i}" for i in range(6)]
    server.delay = lambda p: 0.05 * (6 - int(p[1:]))  # early prompts answer last
    texts, loglik = ServedLM(config(server, concurrency=4)).generate(prompts)
    assert texts == [f"re: {p}" for p in prompts]
    assert loglik.dtype == torch.float32 and loglik.shape == (6,) and torch.isnan(loglik).all()
    finished = [r["body"]["messages"][0]["content"] for r in server.requests]
    assert sorted(finished) == prompts


def test_greedy_requests_with_max_tokens_chat_and_completions(server):
    ServedLM(config(server, max_new_tokens=7)).generate(["hello"])
    texts, _ = ServedLM(config(server, chat=False)).generate(["raw prompt"])
    chat, completion = server.requests
    assert chat["path"] == "/v1/chat/completions" and completion["path"] == "/v1/completions"
    assert chat["body"] == {
        "model": "fake-model",
        "max_tokens": 7,
        "temperature": 0,
        "n": 1,
        "messages": [{"role": "user", "content": "hello"}],
    }
    assert completion["body"]["prompt"] == "raw prompt" and completion["body"]["temperature"] == 0
    assert texts == ["re: raw prompt"]


def test_a_429_waits_its_retry_after_and_a_503_is_retried(server):
    server.faults = [
        (429, {"Retry-After": "1"}, {"error": {"message": "rate limited"}}),
        (503, {}, {"error": {"message": "overloaded"}}),
    ]
    texts, _ = ServedLM(config(server, concurrency=1)).generate(["only"])
    assert texts == ["re: only"]
    first, second, third = (r["at"] for r in server.requests)
    assert second - first >= 0.95  # Retry-After: 1 was waited
    assert third - second < 0.9  # the 503 had none: a short backoff


def test_a_timeout_is_retried(server):
    server.faults = [(0, {"sleep": 1.0}, None)]
    texts, _ = ServedLM(config(server, timeout=0.3)).generate(["slow"])
    assert texts == ["re: slow"] and len(server.requests) == 2


def test_retries_exhausted_name_the_status(server):
    server.faults = [(503, {}, {"error": {"message": "overloaded"}})] * 3
    with pytest.raises(ServedError, match=r"^503 from .*/v1/chat/completions after 2 retries: overloaded$"):
        ServedLM(config(server, retries=2)).generate(["x"])


def test_a_401_fails_at_once_in_one_line(server):
    server.faults = [(401, {}, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})]
    with pytest.raises(ServedError) as err:
        ServedLM(config(server)).generate(["x"])
    message = str(err.value)
    assert "\n" not in message and message.startswith("401 from ")
    assert server.base_url + "/chat/completions" in message and "Incorrect API key provided" in message
    assert len(server.requests) == 1  # not retried


def test_the_key_comes_from_the_named_environment_variable(server, monkeypatch):
    assert not any("key" in f.name and f.name != "api_key_env" for f in fields(ServedConfig))
    monkeypatch.setenv("MY_SERVED_KEY", "sk-test-123")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ServedLM(config(server, api_key_env="MY_SERVED_KEY")).generate(["a"])
    ServedLM(config(server)).generate(["b"])  # OPENAI_API_KEY unset: no header
    with_key, without = server.requests
    assert with_key["headers"]["Authorization"] == "Bearer sk-test-123"
    assert "Authorization" not in without["headers"]


def test_likelihood_paths_are_refused_in_one_line(server):
    from rerag.infer.readers import ParametricReader, RAGReader

    lm = ServedLM(config(server))
    with pytest.raises(ValueError, match="^a served reader gives no log-likelihoods.*in-process --llm$"):
        lm.loglik(["p"], ["a"])
    with pytest.raises(ValueError, match="no log-likelihoods: mode 'rag'"):
        RAGReader(lm)
    with pytest.raises(ValueError, match="num_beams=2"):
        lm.generate(["p"], num_beams=2)
    assert RAGReader(lm, mode="ralm", template="{question}|{context}")(["q"], [["a", "b"]]) == ["re: q|a\n\nb"]
    assert ParametricReader(lm, template="{question}?")(["q"]) == ["re: q?"]


def test_settings_are_checked_and_served_options_need_llm_served(server):
    with pytest.raises(ValueError, match="--served.base_url"):
        ServedLM(ServedConfig())
    with pytest.raises(ValueError, match="--llm served"):
        served_lm("some/hf-model", config(server))
    assert served_lm("some/hf-model", ServedConfig()) is None and served_lm(None, ServedConfig()) is None


def write_fid(path, n: int = 4) -> None:
    countries = ["France", "Spain", "Italy", "Chile"]
    capitals = ["Paris", "Madrid", "Rome", "Santiago"]
    with open(path, "w") as f:
        for i in range(n):
            record = {
                "id": str(i),
                "question": f"what is the capital of {countries[i]}",
                "answers": [capitals[i]],
                "ctxs": [
                    {"id": f"{i}-a", "title": countries[i], "text": f"{capitals[i]} is the capital of {countries[i]}."},
                    {"id": f"{i}-b", "title": "Noise", "text": "Nothing to see here."},
                    {"id": f"{i}-c", "title": "More noise", "text": "Still nothing."},
                ],
            }
            f.write(json.dumps(record) + "\n")


def test_rerag_erag_reads_through_the_served_endpoint(server, tmp_path, monkeypatch, capsys):
    from rerag.cli import main

    def answer(prompt: str) -> str:  # the capital when a document names it
        found = re.search(r"(\w+) is the capital of", prompt)
        return found[1] if found else "unknown"

    server.answer = answer
    monkeypatch.setenv("ERAG_TEST_KEY", "sk-erag")
    write_fid(tmp_path / "dev.jsonl")
    args = ["erag", "--data_file", str(tmp_path / "dev.jsonl"), "--ranking", "retriever", "--top_k", "3"]
    served = ["--llm", "served", "--served.base_url", server.base_url, "--served.model", "fake-model"]
    served += ["--served.api_key_env", "ERAG_TEST_KEY", "--served.concurrency", "3"]
    main([*args, *served, "--reader", "ralm", "--metrics", "[P@1, MRR]", "--output_dir", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "erag_report.json").read_text())
    assert report["reader"] == {"name": f"fake-model served at {server.base_url}", "parameters": None}
    assert report["end_to_end"]["aggregated"] == 1.0
    assert report["labelings"]["erag"]["labels"] == {str(i): [1.0, 0.0, 0.0] for i in range(4)}
    assert len(server.requests) == 4 * 3 + 4  # each document alone, then each list in one prompt
    assert {r["headers"]["Authorization"] for r in server.requests} == {"Bearer sk-erag"}
    with pytest.raises(SystemExit):  # the default --reader rag needs likelihoods
        main([*args, *served, "--output_dir", str(tmp_path / "rag")])
    error = capsys.readouterr().err.splitlines()[0]
    assert error.startswith("rerag erag: error: ValueError: a served reader gives no log-likelihoods: --reader rag")


def test_rerag_eor_reads_every_retriever_through_the_served_endpoint(server, tmp_path):
    from rerag.integrations.eor_evaluation import run_eor

    server.answer = lambda prompt: (re.search(r"(\w+) is the capital of", prompt) or [None, "unknown"])[1]
    write_fid(tmp_path / "dev.jsonl")
    with open(tmp_path / "corpus.jsonl", "w") as f:
        for line in (tmp_path / "dev.jsonl").read_text().splitlines():
            f.writelines(json.dumps(c) + "\n" for c in json.loads(line)["ctxs"])
    report = run_eor(
        questions_file=str(tmp_path / "dev.jsonl"),
        corpus_file=str(tmp_path / "corpus.jsonl"),
        pool=["BM25@2", "ReFree"],
        candidates=5,
        output_dir=str(tmp_path / "out"),
        llm="served",
        served=config(server),
    )
    table = report.table()
    assert re.search(r"\| BM25@2 \| 100\.00 \|", table) and re.search(r"\| ReFree \| 0\.00 \|", table)
    assert len(server.requests) == 4 * 2  # each question read with BM25's passages, then without any
