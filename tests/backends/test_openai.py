"""OpenAIChatBackend against a real HTTP server on loopback: replies, retries, a hung server, a dead port."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from searchgym.backends import ChatBackend
from searchgym.backends.openai import OpenAIChatBackend, OpenAIConfig
from searchgym.errors import BackendError, BackendTimeout, ConfigError
from searchgym.judges import LLMJudge
from tests.helpers import LoopbackServer, send_reply
from tests.judges.helpers import BRIDGE, req, rnd


class Server:
    """A tiny /v1/chat/completions server whose behaviour each test scripts."""

    def __init__(self):
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.plan: list[str] = []  # per request: "ok", "500", "400", "hang", "garbage"; the last one repeats
        self.reply = lambda body: "echo: " + body["messages"][-1]["content"]
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    n = len(server.requests)
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                mode = server.plan[min(n, len(server.plan) - 1)] if server.plan else "ok"
                if self.path != "/v1/chat/completions":
                    return self._send(404, b"not found")
                if mode == "hang":
                    server.loop.release.wait(30)
                    return
                if mode in ("500", "400"):
                    return self._send(int(mode), b'{"error": "scripted"}')
                if mode == "garbage":
                    return self._send(200, b"<html>proxy error</html>")
                payload = {"choices": [{"message": {"role": "assistant", "content": server.reply(body)}}]}
                self._send(200, json.dumps(payload).encode())

            def _send(self, status, data):
                send_reply(self, status, data, [("Content-Type", "application/json")])

        lock = threading.Lock()
        self.loop = LoopbackServer(Handler, "/v1")
        self.url = self.loop.url

    def close(self):
        self.loop.close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def backend(url, **kwargs):
    defaults = {"model": "judge-model", "timeout_s": 2.0, "connect_timeout_s": 1.0, "retries": 2, "backoff_s": 0.01}
    return OpenAIChatBackend(OpenAIConfig(base_url=url, **{**defaults, **kwargs}))


def conv(text):
    return [{"role": "user", "content": text}]


def test_batch_replies_in_order_with_settings(server):
    with backend(server.url, api_key="secret", extra_body={"chat_template_kwargs": {"enable_thinking": False}}) as b:
        assert isinstance(b, ChatBackend)
        replies = b.chat([conv(f"m{i}") for i in range(6)], max_tokens=7, temperature=0.3)
    assert replies == [f"echo: m{i}" for i in range(6)]
    body = server.requests[0]
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("judge-model", 7, 0.3)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert server.headers[0]["Authorization"] == "Bearer secret"


def test_transient_errors_are_retried(server):
    server.plan = ["500", "garbage", "ok"]
    with backend(server.url) as b:
        assert b.chat([conv("x")]) == ["echo: x"]
    assert len(server.requests) == 3


def test_client_errors_are_not_retried(server):
    server.plan = ["400"]
    with backend(server.url) as b, pytest.raises(BackendError, match="HTTP 400"):
        b.chat([conv("x")])
    assert len(server.requests) == 1


def test_retries_are_bounded(server):
    server.plan = ["500"]
    with backend(server.url, retries=1) as b, pytest.raises(BackendError, match="after 2 attempts") as info:
        b.chat([conv("x")])
    assert not isinstance(info.value, BackendTimeout)
    assert len(server.requests) == 2


def test_hung_server_times_out(server):
    server.plan = ["hang"]
    start = time.monotonic()
    with backend(server.url, timeout_s=0.3, retries=1) as b, pytest.raises(BackendTimeout, match="timed out"):
        b.chat([conv("x"), conv("y")])
    assert time.monotonic() - start < 10  # two attempts of 0.3 s each, not the server's 30 s
    assert len(server.requests) == 4  # 2 conversations x 2 attempts


def test_dead_port_raises_quickly():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again on exit: nothing listens there
    start = time.monotonic()
    with backend(f"http://127.0.0.1:{port}/v1") as b, pytest.raises(BackendError, match="connection failed"):
        b.chat([conv("x")])
    assert time.monotonic() - start < 10


def test_config_is_validated():
    for kwargs in ({"base_url": "localhost:1"}, {"model": ""}, {"timeout_s": 0}, {"retries": -1}, {"max_concurrency": 0}):
        with pytest.raises(ConfigError):
            OpenAIConfig(**{"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs})


def test_llm_judge_end_to_end_over_http(server):
    def judge_reply(body):
        latest = body["messages"][-1]["content"]
        good = "<search>Rome river</search>" in latest.split("latest round")[1]
        return "```json\n" + json.dumps({"analysis": "checked", "retrieval_reward": 1, "thinking_reward": int(good)}) + "\n```"

    server.reply = judge_reply
    with backend(server.url) as b:
        judge = LLMJudge(b)
        first = rnd("capital of Italy", "d1")
        verdicts = judge.label([req(BRIDGE, first), req(BRIDGE, rnd("Rome river", "d7"), first)])
    assert [(v.retrieval_utility, v.reasoning_correctness, v.failed) for v in verdicts] == [(1, 0, False), (1, 1, False)]
    assert server.requests[0]["messages"][0]["role"] == "system"


def test_llm_judge_over_hung_server_fails_labels_not_the_caller(server):
    server.plan = ["hang"]
    with backend(server.url, timeout_s=0.2, retries=0) as b:
        (v,) = LLMJudge(b).label([req(BRIDGE, rnd("capital of Italy", "d1"))])
    assert v.failed and v.error == "timeout" and v.contribution == 0
