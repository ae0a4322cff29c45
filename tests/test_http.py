"""`searchgym.http.HTTPClient` against a real HTTP server on loopback: retries, timeouts, typed errors."""

from __future__ import annotations

import json
import socket
import time
from http.server import BaseHTTPRequestHandler

import pytest

from searchgym.errors import BackendError, BackendTimeout, RetrievalError, RetrievalTimeout
from searchgym.http import HTTPClient, RetryAnswer
from tests.helpers import LoopbackServer, send_reply


class Scripted:
    """A server answering each request with the next step of `script`: `(status, body, *headers)`,
    `"hang"` (never answers) or `"trickle"` (a 200 whose body comes a byte every 0.2 s)."""

    def __init__(self):
        self.script: list = []
        self.requests: list = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._answer(None)

            def do_POST(self):
                self._answer(json.loads(self.rfile.read(int(self.headers["content-length"]))))

            def _answer(self, body):
                server.requests.append((self.command, self.path, body, self.headers.get("authorization")))
                step = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                if step == "hang":
                    server.loop.release.wait(30)
                    return
                if step == "trickle":
                    data = b'{"ok": true}'
                    self.send_response(200)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    for byte in data:
                        if server.loop.release.wait(0.2):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    return
                status, payload, *headers = step
                send_reply(self, status, payload, headers)

        self.loop = LoopbackServer(Handler)
        self.url = self.loop.url

    def close(self):
        self.loop.close()


@pytest.fixture
def server():
    s = Scripted()
    yield s
    s.close()


FAST = {"timeout_s": 5.0, "retries": 2, "backoff_s": 0.01}


def test_a_503_is_retried_and_the_200_after_it_is_returned(server):
    server.script = [(503, b"busy"), (200, {"answer": 42})]
    with_key = HTTPClient(base_url=server.url + "/", headers={"authorization": "Bearer k"})
    assert with_key.request("POST", "/ask", {"q": 1}, **FAST) == {"answer": 42}
    assert server.requests == [("POST", "/ask", {"q": 1}, "Bearer k")] * 2
    with_key.close()


def test_a_400_is_not_retried(server):
    server.script = [(400, b"bad field"), (200, {})]
    client = HTTPClient(base_url=server.url)
    with pytest.raises(BackendError, match="POST .*/ask failed after 1 attempt: HTTP 400: bad field") as raised:
        client.request("POST", "/ask", {}, **FAST)
    assert type(raised.value) is BackendError and len(server.requests) == 1


def test_retries_are_bounded_and_the_error_is_the_callers_type(server):
    server.script = [(502, b"proxy lost it")]
    client = HTTPClient(base_url=server.url, error=RetrievalError, timeout_error=RetrievalTimeout, hint="Look at it.")
    with pytest.raises(RetrievalError, match="failed after 3 attempts: HTTP 502: proxy lost it. Look at it.") as raised:
        client.request("GET", "/x", **FAST)
    assert type(raised.value) is RetrievalError and len(server.requests) == 3
    # A status the caller takes out of the retry set fails at once.
    server.requests.clear()
    strict = HTTPClient(base_url=server.url, retry_status=frozenset({503}))
    with pytest.raises(BackendError, match="1 attempt"):
        strict.request("GET", "/x", **FAST)
    assert len(server.requests) == 1


def test_a_server_that_never_answers_raises_a_typed_timeout_after_each_attempt(server):
    server.script = ["hang"]
    client = HTTPClient(base_url=server.url)
    start = time.monotonic()
    with pytest.raises(BackendTimeout, match="timed out after 2 attempts"):
        client.request("POST", "/ask", {}, timeout_s=0.3, retries=1, backoff_s=0.01)
    assert time.monotonic() - start < 10  # two attempts of 0.3 s, not the server's 30 s
    assert len(server.requests) == 2


def test_a_budget_bounds_the_whole_call(server):
    server.script = ["hang"]
    client = HTTPClient(base_url=server.url, error=RetrievalError, timeout_error=RetrievalTimeout)
    with pytest.raises(RetrievalTimeout, match="within the 0.5 s budget"):
        client.request("POST", "/ask", {}, timeout_s=0.5, budget_s=0.5, retries=5, backoff_s=0.01)
    assert len(server.requests) == 1  # the budget was spent on the first attempt: no second one
    # Failures that keep coming stop when the next wait would overrun the budget, retries left or not. On a
    # busy machine the last attempt may instead start with almost no budget left and time out: either way
    # the budget ends the call with a typed timeout that names it.
    server.requests.clear()
    server.script = [(503, b"busy")]
    with pytest.raises(RetrievalTimeout, match=r"the 0\.5 s budget"):
        client.request("POST", "/ask", {}, timeout_s=5.0, budget_s=0.5, retries=50, backoff_s=0.2)
    assert 1 <= len(server.requests) < 50


def test_a_trickling_answer_is_cut_off_at_the_timeout(server):
    server.script = ["trickle"]
    client = HTTPClient(base_url=server.url)
    with pytest.raises(BackendTimeout, match="still sending"):
        client.request("GET", "/slow", timeout_s=0.5, retries=0, backoff_s=0.0)


def test_a_refused_connection_is_a_typed_error_not_a_timeout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again on exit: nothing listens there
    client = HTTPClient(base_url=f"http://127.0.0.1:{port}")
    start = time.monotonic()
    with pytest.raises(BackendError, match="failed after 3 attempts: connection failed.*running") as raised:
        client.request("POST", "/ask", {}, timeout_s=30.0, retries=2, backoff_s=0.01)
    assert not isinstance(raised.value, BackendTimeout)
    assert time.monotonic() - start < 10  # refused at once, not after the 30 s timeout


def test_retry_after_is_waited_on_within_the_budget_without_counting_retries(server, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    restarting = (503, b"restarting", ("Retry-After", "5"))
    server.script = [restarting, restarting, (200, {"ok": True})]
    client = HTTPClient(base_url=server.url, retry_after_max_s=1.5)
    assert client.request("GET", "/x", timeout_s=5.0, budget_s=30.0, retries=0, backoff_s=0.1) == {"ok": True}
    assert waits == [1.5, 1.5]
    # Without a budget there is nothing to wait within: the 503 counts as an ordinary failure.
    server.script = [restarting]
    with pytest.raises(BackendError, match="1 attempt: HTTP 503"):
        client.request("GET", "/x", timeout_s=5.0, retries=0, backoff_s=0.1)


@pytest.mark.parametrize("mode", ["raise", "retry", "text"])
def test_an_answer_that_is_not_json(server, mode):
    server.script = [(200, b"<html>proxy</html>"), (200, {"ok": True})]
    client = HTTPClient(base_url=server.url)
    if mode == "raise":
        with pytest.raises(BackendError, match="invalid JSON"):
            client.request("GET", "/x", invalid_json=mode, **FAST)
    elif mode == "retry":
        assert client.request("GET", "/x", invalid_json=mode, **FAST) == {"ok": True}
    else:
        assert client.request("GET", "/x", invalid_json=mode, **FAST) == "<html>proxy</html>"
    assert len(server.requests) == (2 if mode == "retry" else 1)


def test_extract_may_ask_for_the_answer_again(server):
    server.script = [(200, {"choices": []}), (200, {"choices": ["hi"]})]

    def first_choice(answer):
        if not answer["choices"]:
            raise RetryAnswer("no choices")
        return answer["choices"][0]

    client = HTTPClient(base_url=server.url)
    assert client.request("POST", "/c", {}, extract=first_choice, **FAST) == "hi"
    server.script = [(200, {"choices": []})]
    with pytest.raises(BackendError, match="3 attempts: no choices"):
        client.request("POST", "/c", {}, extract=first_choice, **FAST)


def test_an_oversized_answer_is_refused(server):
    server.script = [(200, {"blob": "x" * 1000})]
    client = HTTPClient(base_url=server.url, max_response_bytes=100)
    with pytest.raises(BackendError, match="more than 100 bytes"):
        client.request("GET", "/x", **FAST)
    assert len(server.requests) == 1
