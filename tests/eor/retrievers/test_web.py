import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from eor import WebSearchRetriever


class _SearchHandler(BaseHTTPRequestHandler):
    """Answers GET /search?query=... and POST /search {"query": ...} with nested JSON results."""

    requests: list = []

    def _answer(self, query: str) -> None:
        self.requests.append((self.command, query, self.headers.get("X-API-KEY")))
        payload = {
            "data": {
                "items": [
                    {"url": f"https://example.org/{i}", "name": f"Result {i}", "body": f"{query} answer {i}"}
                    for i in range(5)
                ]
            }
        }
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._answer(urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0])

    def do_POST(self):  # noqa: N802
        self._answer(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["query"])

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _SearchHandler.requests = []
    httpd = HTTPServer(("127.0.0.1", 0), _SearchHandler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/search"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _retriever(endpoint, **options):
    return WebSearchRetriever(
        endpoint,
        query_param="query",
        results_path="data.items",
        text_field="body",
        title_field="name",
        id_field="url",
        k=3,
        headers={"X-API-KEY": "secret"},
        **options,
    )


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_web_adapter_reads_ranked_results(server, method):
    results = _retriever(server, method=method).retrieve(["capital of france", "tallest mountain"])
    assert [(p.id, p.title, p.text) for p in results[0]] == [
        (f"https://example.org/{i}", f"Result {i}", f"capital of france answer {i}") for i in range(3)
    ]
    assert [p.score for p in results[1]] == [1.0, 0.5, pytest.approx(1 / 3)]
    assert _SearchHandler.requests == [(method, "capital of france", "secret"), (method, "tallest mountain", "secret")]


def test_wrong_results_path_or_field_is_reported(server):
    with pytest.raises(ValueError, match="no 'hits' on results path"):
        WebSearchRetriever(server, query_param="query", results_path="data.hits").retrieve(["q"])
    with pytest.raises(ValueError, match="result 1 has no string field 'snippet'"):
        WebSearchRetriever(server, query_param="query", results_path="data.items").retrieve(["q"])
