"""The load generator (`tools.loadgen`) counts every bad answer and never hangs: answers are checked in full the
first time, byte for byte afterwards, and a connection that fails or stalls is replaced."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tools.loadgen import free_port, load_test

GOOD = {"result": [[{"document": {"id": "d1", "contents": '"Rome"\nRome.'}, "score": 1.5}]]}


class _Server(ThreadingHTTPServer):
    daemon_threads = True


def serve(answer):
    """A keep-alive HTTP/1.1 server on loopback whose `/retrieve` answers `answer(n)` (status, body)."""
    count = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # head and body in one write (flushed after each request)

        def do_POST(self):  # noqa: N802 - the http.server API
            self.rfile.read(int(self.headers["Content-Length"]))
            count["n"] += 1
            status, body = answer(count["n"])
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize(
    "answer, bad",
    [
        (lambda n: (200, json.dumps(GOOD).encode()), False),
        # A different, still valid, answer each time: parsed in full, not an error.
        (lambda n: (200, json.dumps({"result": [[{**GOOD["result"][0][0], "score": float(n)}]]}).encode()), False),
        (lambda n: (200, b'{"result": "nope"}'), True),
        (lambda n: (200, b"not json"), True),
        (lambda n: (500, json.dumps(GOOD).encode()), True),
        (lambda n: (200, json.dumps({"result": [[{"document": {}}]]}).encode()), True),  # no score
        # Valid at first, then wrong: the byte comparison sends it to the full check, which fails it.
        (lambda n: (200, json.dumps(GOOD).encode() if n <= 4 else b'{"result": [[{"id": 1}]]}'), True),
    ],
)
def test_every_answer_is_checked(answer, bad):
    server = serve(answer)
    try:
        t = load_test(server.server_address[1], ["q1", "q2"], 3, clients=2, duration_s=20.0, max_requests=60)
    finally:
        server.shutdown()
    if bad:
        assert t.errors > 0 and t.queries + t.errors == 60 and t.queries <= 4
    else:
        assert (t.errors, t.queries) == (0, 60) and len(t.latencies_ms) == 60


def test_a_stalled_server_costs_the_timeout_not_a_hang():
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel's backlog), never answers
    try:
        start = time.monotonic()
        t = load_test(listener.getsockname()[1], ["q"], 3, clients=3, duration_s=0.5, max_requests=10**6, request_timeout_s=0.3)
        elapsed = time.monotonic() - start
    finally:
        listener.close()
    assert t.queries == 0 and t.errors >= 3 and elapsed < 10.0  # the 0.5 s run and a 0.3 s timeout, not a hang


def test_no_server_is_errors_not_a_hang():
    start = time.monotonic()
    t = load_test(free_port(), ["q"], 3, clients=2, duration_s=0.3, max_requests=200, request_timeout_s=1.0)
    assert t.queries == 0 and t.errors == 200 and time.monotonic() - start < 10.0  # refused at once, not 200 timeouts of 1 s


def test_no_clients_or_no_requests_end_at_once():
    server = serve(lambda n: (200, json.dumps(GOOD).encode()))
    try:
        for clients, max_requests in ((0, 10), (3, 0)):
            t = load_test(server.server_address[1], ["q"], 3, clients=clients, duration_s=60.0, max_requests=max_requests)
            assert (t.queries, t.errors) == (0, 0) and t.seconds < 10.0  # at once, not after the 60 s duration
    finally:
        server.shutdown()
