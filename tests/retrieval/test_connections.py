"""The retrieval server bounds slow and greedy clients: header, body and keep-alive deadlines, a connection
limit, and caps on a request head's size and header count (`searchgym.retrieval.connections`), with
uvicorn's httptools and h11 protocols alike."""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("fastapi")

from searchgym.corpus import Corpus
from searchgym.errors import ConfigError
from searchgym.retrieval import BM25Retriever
from searchgym.retrieval.server import BackgroundServer, ServerConfig
from tests.conftest import TEN_DOCS

FAST = dict(port=0, header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_timeout_s=0.5, max_connections=4,
            max_request_line_bytes=200, max_header_bytes=2000, max_header_fields=10)
# For answers that must come at once: deadlines far beyond "at once", so a busy machine cannot blur the two.
PATIENT = dict(FAST, header_timeout_s=10.0, body_timeout_s=10.0, keep_alive_timeout_s=10.0)
BODY = json.dumps({"queries": ["Rome"], "topk": 1}).encode()


class SlowSearch:
    """rank-bm25 whose searches take a second: longer than every deadline above."""

    def __init__(self):
        self.inner = BM25Retriever(Corpus(TEN_DOCS, name="ten"), backend="rank_bm25", cache_dir=False)
        self.corpus = self.inner.corpus

    def search(self, queries, k):
        time.sleep(1.0)
        return self.inner.search(queries, k)

    def describe(self):
        return self.inner.describe()


def _serve(protocol: str, monkeypatch, config: dict):
    import uvicorn.protocols.http.auto as auto

    if protocol == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        monkeypatch.setattr(auto, "AutoHTTPProtocol", H11Protocol)
    else:
        pytest.importorskip("httptools")
    retriever = BM25Retriever(Corpus(TEN_DOCS, name="ten"), backend="rank_bm25", cache_dir=False)
    return BackgroundServer(retriever, ServerConfig(**config, warmup=False))


@pytest.fixture(params=["httptools", "h11"])
def server(request, monkeypatch):
    with _serve(request.param, monkeypatch, FAST) as s:
        yield s


@pytest.fixture(params=["httptools", "h11"])
def patient_server(request, monkeypatch):
    """The same limits, with 10 s deadlines: held connections stay open for as long as a test needs them."""
    with _serve(request.param, monkeypatch, PATIENT) as s:
        yield s


def _connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return sock


def _read_until_closed(sock: socket.socket, limit_s: float = 5.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started, data = time.monotonic(), b""
    sock.settimeout(limit_s)
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    return data, time.monotonic() - started


def _request(body: bytes = BODY, length: int | None = None, keep_alive: bool = True) -> bytes:
    head = (f"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body) if length is None else length}\r\n")
    if not keep_alive:
        head += "connection: close\r\n"
    return head.encode() + b"\r\n" + body


def test_a_socket_that_sends_nothing_is_closed_after_the_header_timeout(server):
    with _connect(server) as sock:
        data, took = _read_until_closed(sock)
    assert data == b"" and 0.3 < took < 3.0


def test_headers_dribbled_a_byte_at_a_time_get_408_at_the_deadline_not_later(server):
    request = _request()
    with _connect(server) as sock:
        started = time.monotonic()
        try:
            for byte in request[:40]:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)  # each byte well inside the deadline: the deadline is for the whole headers
        except (BrokenPipeError, ConnectionResetError):
            pass
        data, _ = _read_until_closed(sock)
        took = time.monotonic() - started
    assert data.startswith(b"HTTP/1.1 408") and b"request headers not complete" in data
    assert took < 3.0


def test_a_body_shorter_than_its_content_length_gets_408_and_the_connection_closes(server):
    with _connect(server) as sock:
        sock.sendall(_request(length=len(BODY) + 50))
        data, took = _read_until_closed(sock)
    assert data.startswith(b"HTTP/1.1 408") and b"shorter than its Content-Length" in data
    assert b"connection: close" in data.lower() and took < 3.0


def test_kept_alive_connections_serve_requests_then_close_when_idle(server):
    with _connect(server) as sock:
        for _ in range(2):
            sock.sendall(_request())
            head = sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 200"), head
        time.sleep(0.1)
        data, took = _read_until_closed(sock)  # idle after its answers: closed by the keep-alive timeout
    assert data == b"" and took < 3.0


def test_connections_past_the_limit_get_503_at_once_and_the_others_are_served(patient_server):
    held = [_connect(patient_server) for _ in range(PATIENT["max_connections"])]
    try:
        time.sleep(0.1)
        with _connect(patient_server) as extra:
            data, took = _read_until_closed(extra, limit_s=20.0)
        # At once: not after the 10 s header deadline, which the held connections are still within.
        assert data.startswith(b"HTTP/1.1 503") and b"too many open connections" in data and took < 5.0
        assert b"retry-after: 1" in data.lower()
        held[0].sendall(_request(keep_alive=False))
        assert _read_until_closed(held[0])[0].startswith(b"HTTP/1.1 200")
    finally:
        for sock in held:
            sock.close()


def test_a_search_slower_than_every_deadline_is_answered():
    # Deadlines bound what the client sends, never how long the server takes to answer.
    with BackgroundServer(SlowSearch(), ServerConfig(**FAST, warmup=False)) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
            sock.sendall(_request(keep_alive=False))
            data, _ = _read_until_closed(sock)
    assert data.startswith(b"HTTP/1.1 200") and b'"id":"d1"' in data.replace(b" ", b"")


@pytest.mark.parametrize("field", ["header_timeout_s", "body_timeout_s", "keep_alive_timeout_s", "max_connections",
                                   "max_request_line_bytes", "max_header_bytes", "max_header_fields"])
def test_the_bounds_are_validated(field):
    with pytest.raises(ConfigError, match=field):
        ServerConfig(**{field: 0})


# -- request heads past their caps -------------------------------------------------------------------------


def _send_until_refused(sock: socket.socket, chunks) -> bytes:
    """Send `chunks` until the server stops reading, then everything it answered."""
    try:
        for chunk in chunks:
            sock.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return _read_until_closed(sock)[0]


@pytest.mark.parametrize("kind", ["many headers", "one long header", "long request line", "headers in small pieces"])
def test_a_request_head_past_its_caps_is_refused_as_it_arrives(server, kind):
    opening = b"POST /retrieve HTTP/1.1\r\nhost: x\r\n"
    if kind == "many headers":  # 11 header lines of 20 bytes: past the count (10) long before the size (2000)
        chunks = [opening + b"".join(b"x-h%02d: %s\r\n" % (i, b"v" * 12) for i in range(11))] + [b"x-more: 1\r\n"] * 2000
        expected = b"431", b"more than 10 header lines"
    elif kind == "one long header":
        chunks = [opening + b"x-long: "] + [b"v" * 500] * 2000
        expected = b"431", b"request head over 2000 bytes"
    elif kind == "long request line":
        chunks = [b"GET /health?q="] + [b"a" * 50] * 2000
        expected = b"414", b"request line over 200 bytes"
    else:  # the caps count across chunks of any size: 1 byte at a time here
        chunks = [bytes([b]) for b in opening + b"x-long: " + b"v" * 2100]
        expected = b"431", b"request head over 2000 bytes"
    with _connect(server) as sock:
        data = _send_until_refused(sock, chunks)
    assert data.startswith(b"HTTP/1.1 " + expected[0]) and expected[1] in data, data[:200]
    assert b"connection: close" in data.lower()


def test_requests_within_the_caps_are_served_on_a_kept_alive_connection(server):
    # 10 header lines of a 2000-byte head, twice on one connection (the caps count each request anew).
    extra = b"".join(b"x-h%d: %s\r\n" % (i, b"v" * 60) for i in range(6))
    head = b"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" + extra
    with _connect(server) as sock:
        for _ in range(2):
            sock.sendall(head + b"content-length: %d\r\n\r\n" % len(BODY) + BODY)
            answer = sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer
        # Pipelined: two requests in one write are counted one head at a time.
        sock.sendall((head + b"content-length: %d\r\n\r\n" % len(BODY) + BODY) * 2)
        data = b""
        while data.count(b"HTTP/1.1 200") < 2:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk


def test_with_an_api_key_a_client_without_it_is_refused_before_its_body_is_read():
    key = "k" * 16
    retriever = BM25Retriever(Corpus(TEN_DOCS, name="ten"), backend="rank_bm25", cache_dir=False)
    with BackgroundServer(retriever, ServerConfig(**PATIENT, warmup=False, api_key=key)) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
            # A body that will never arrive: the answer cannot wait for it (nor for the 10 s body deadline).
            sock.sendall(b"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000000\r\n\r\n")
            data, took = _read_until_closed(sock, limit_s=20.0)
        assert data.startswith(b"HTTP/1.1 401") and took < 5.0
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:  # no key, and headers past the cap
            data = _send_until_refused(sock, [b"POST /retrieve HTTP/1.1\r\nx-long: "] + [b"v" * 500] * 100)
        assert data.startswith(b"HTTP/1.1 431")


def test_head_meter_counts_lines_across_chunks_and_stops_at_the_empty_line():
    from searchgym.retrieval.connections import HeadMeter

    meter = HeadMeter(max_line=20, max_bytes=60, max_fields=2)
    # Leading empty lines are skipped (and counted), then a request line, two fields, the end: 57 bytes.
    head = b"\r\n\nGET / HTTP/1.1\r\na: 1\nb: 22\r\n\r\n"
    for i in range(len(head)):
        assert meter.feed(head[i : i + 1]) is None
    assert meter.done and (meter.size, meter.fields) == (len(head), 2) == (33, 2)
    assert meter.feed(b"any body bytes at all" * 10) is None and meter.size == 33  # after the end: not the head's
    meter.reset()
    assert meter.feed(b"GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\n") == (431, b"more than 2 header lines")
    meter.reset()
    assert meter.feed(b"GET /" + b"a" * 16) == (414, b"request line over 20 bytes")  # 21 bytes, no newline yet
    meter.reset()
    assert meter.feed(b"GET / HTTP/1.1\r\nlong: " + b"v" * 40) == (431, b"request head over 60 bytes")
    meter.reset()
    assert meter.feed(b"\r\n" * 31) == (431, b"request head over 60 bytes")  # 62 bytes of empty lines
