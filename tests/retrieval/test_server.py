"""The retrieval server and the HTTP client, over loopback, each server on a free port it picks itself."""

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
requests = pytest.importorskip("requests")

from searchgym.corpus import Document
from searchgym.errors import RetrievalAnswerError, RetrievalError, RetrievalTimeout
from searchgym.retrieval import BM25Retriever, DenseRetriever, Hit, HTTPRetriever, HTTPRetrieverConfig, HybridRetriever
from searchgym.retrieval.http import parse_response
from searchgym.retrieval.server import BackgroundServer, RequestRejected, ServerConfig, parse_retrieve_request
from tests.helpers import LoopbackServer, send_reply

QUERIES = ["Which river flows through Rome?", "Who discovered radioactivity?", "zzqxj", "Berlin"]


@pytest.fixture
def bm25(ten_doc_corpus):
    r = BM25Retriever(ten_doc_corpus, cache_dir=False)
    r.search(["Rome"], 1)  # numba compiles on the first search: keep that out of request timeouts
    return r


def test_server_speaks_search_r1(bm25):
    with BackgroundServer(bm25) as server:
        # Exactly what Search-R1's generation.py sends, with the library it uses.
        payload = {"queries": QUERIES[:2], "topk": 3, "return_scores": True}
        response = requests.post(server.url, json=payload, timeout=10)
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        body = response.json()
        assert list(body) == ["result"] and len(body["result"]) == 2
        first = body["result"][0]
        assert len(first) == 3 and all(set(item) == {"document", "score"} for item in first)
        assert all(set(item["document"]) == {"id", "contents"} for item in first)
        assert first[0]["document"] == {
            "id": "d7",
            "contents": '"Tiber"\nThe Tiber is the third-longest river in Italy and flows through Rome.',
        }
        # Search-R1's _passages2string: title is the first line of contents, text the rest.
        content = first[0]["document"]["contents"]
        assert content.split("\n")[0] == '"Tiber"' and "\n".join(content.split("\n")[1:]).startswith("The Tiber")
        direct = bm25.search(QUERIES[:2], 3)
        assert [[(i["document"]["id"], i["score"]) for i in row] for row in body["result"]] == [
            [(h.doc.id, h.score) for h in hits] for hits in direct
        ]

        # Without return_scores: bare documents. Without topk: the server's default (3).
        plain = requests.post(server.url, json={"queries": ["Tiber"]}, timeout=10).json()
        assert plain["result"][0][0] == {"id": "d7", "contents": first[0]["document"]["contents"]}
        assert (
            len(requests.post(server.url, json={"queries": ["river"], "topk": None}, timeout=10).json()["result"][0])
            == 3
        )
        assert requests.post(server.url, json={"queries": []}, timeout=10).json() == {"result": []}

        health = requests.get(server.url.replace("/retrieve", "/health"), timeout=10).json()
        assert health["status"] == "ok" and health["retriever"] == bm25.describe() and health["documents"] == 10


def test_http_retriever_returns_what_direct_calls_return(ten_doc_corpus, bm25, minilm):
    dense = DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=False)
    for retriever in (bm25, dense, HybridRetriever([bm25, dense])):
        with BackgroundServer(retriever) as server, HTTPRetriever(server.url) as client:
            assert client.search(QUERIES, 5) == retriever.search(QUERIES, 5)
            described = client.describe()
            assert (
                described["remote"] == retriever.describe() and described["corpus_hash"] == ten_doc_corpus.content_hash
            )


def test_http_retriever_splits_large_batches(bm25):
    with BackgroundServer(bm25, ServerConfig(port=0, max_queries=2)) as server:
        client = HTTPRetriever(HTTPRetrieverConfig(url=server.url, max_queries_per_request=2))
        assert client.search(QUERIES, 2) == bm25.search(QUERIES, 2)
        with pytest.raises(RetrievalError, match="413"):
            HTTPRetriever(server.url).search(QUERIES, 2)


def test_requests_over_the_caps_are_refused(bm25):
    config = ServerConfig(port=0, max_queries=4, max_query_chars=50, max_topk=5, max_results=12, max_body_bytes=2000)
    with BackgroundServer(bm25, config) as server:

        def post(**kw):
            return requests.post(server.url, timeout=10, **kw)

        assert post(json={"queries": ["a"] * 5}).status_code == 413
        # 4 queries x topk 3 = 12 documents is the response cap; 4 x 4 = 16 is over it.
        assert post(json={"queries": ["Rome"] * 4, "topk": 3}).status_code == 200
        over = post(json={"queries": ["Rome"] * 4, "topk": 4})
        assert over.status_code == 413 and "16 documents" in over.text
        assert post(json={"queries": ["a" * 51]}).status_code == 413
        assert post(json={"queries": ["a"], "topk": 6}).status_code == 413
        assert post(data=json.dumps({"queries": ["a"], "pad": "x" * 3000})).status_code == 413
        for bad in (
            {"queries": "Rome"},
            {"queries": [1]},
            {"queries": ["a"], "topk": "3"},
            # Search-R1's server takes these as its default (Python truthiness); here they are refused.
            {"queries": ["a"], "topk": 0},
            {"queries": ["a"], "topk": False},
            {"queries": ["a"], "topk": 0.0},
            {"queries": ["a"], "topk": 2.0},
            {"queries": ["a"], "topk": -1},
            {"queries": ["a"], "return_scores": "yes"},
            [1],
        ):
            r = post(json=bad)
            assert r.status_code == 422 and "detail" in r.json(), bad
        assert post(data=b"{not json").status_code == 422
        assert post(json={"queries": ["Rome"], "topk": 5}).status_code == 200


def test_default_caps_accept_search_r1s_default_training_batch():
    # Search-R1's default step: 512 prompts x 5 rollouts, every query in one /retrieve request at topk 3.
    queries = [f"query {i} about a river" for i in range(512 * 5)]
    body = json.dumps({"queries": queries, "topk": 3, "return_scores": True}).encode()
    config = ServerConfig()
    assert len(body) <= config.max_body_bytes
    request = parse_retrieve_request(json.loads(body), config)
    assert (len(request.queries), request.topk) == (2560, 3)
    with pytest.raises(RequestRejected) as refused:
        parse_retrieve_request({"queries": ["q"] * 2561}, ServerConfig(max_queries=2560))
    assert refused.value.status == 413
    assert "at most 2560" in str(refused.value) and "--max-queries" in str(refused.value)


class _Echo:
    """Returns one document per query naming the query; slow, so that concurrent requests queue up."""

    def __init__(self, delay_s=0.05):
        self.delay_s, self.calls = delay_s, []

    def search(self, queries, k):
        self.calls.append(len(queries))
        time.sleep(self.delay_s)
        return [[Hit(Document(f"id:{q}", q, f"text {q}"), float(j)) for j in range(k)] for q in queries]

    def describe(self):
        return {"kind": "echo", "corpus_hash": None}


def test_concurrent_requests_are_batched_and_answered_in_their_own_order():
    echo = _Echo()
    with BackgroundServer(echo) as server, HTTPRetriever(server.url) as client:

        def one(i):
            return client.search([f"q{i}-a", f"q{i}-b"], 2)

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(one, range(48)))
        stats = requests.get(server.url.replace("/retrieve", "/health"), timeout=10).json()["stats"]
    for i, hits in enumerate(results):
        assert [h[0].doc.id for h in hits] == [f"id:q{i}-a", f"id:q{i}-b"] and [x.score for x in hits[0]] == [0.0, 1.0]
    warm_up, *served = echo.calls  # one search ran before the server accepted requests
    assert warm_up == 1 and stats["requests"] == 48 and stats["queries"] == 96 and sum(served) == 96
    # 48 requests against a 50 ms retriever: far fewer calls than requests, several requests per call.
    assert stats["retriever_calls"] == len(served) < 24 and stats["largest_batch"] >= 8


def test_the_retriever_takes_the_next_batch_without_waiting_for_the_event_loop():
    """While the loop is busy (here: blocked outright), the retriever thread goes on to the requests that
    queued up during its previous call; and stopping fails the requests still queued."""
    import asyncio

    from searchgym.retrieval.batching import Batcher

    started, release = threading.Event(), threading.Event()
    calls: list[list[str]] = []

    class Gated:
        def search(self, queries, k):
            calls.append(list(queries))
            started.set()
            release.wait(10)
            return [[Hit(Document(q, "t", q), 1.0)] for q in queries]

    async def scenario():
        batcher = Batcher(Gated(), ServerConfig(warmup=False))
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(["a"], 1))
        while not started.is_set():
            await asyncio.sleep(0.001)
        second = asyncio.ensure_future(batcher.submit(["b", "c"], 1))
        await asyncio.sleep(0)  # `second` queues its job while the first call runs
        release.set()
        time.sleep(0.5)  # the loop is blocked: only the retriever thread can start the second call
        assert calls == [["a"], ["b", "c"]]
        got = [[h[0].doc.id for h in hits] for hits in await asyncio.gather(first, second)]
        release.clear()
        third = asyncio.ensure_future(batcher.submit(["d"], 1))
        while len(calls) < 3:
            await asyncio.sleep(0.001)
        fourth = asyncio.ensure_future(batcher.submit(["e"], 1))
        await asyncio.sleep(0)
        await batcher.stop()
        release.set()
        with pytest.raises(RetrievalError, match="shutting down"):
            await fourth
        with pytest.raises(RetrievalError, match="shutting down"):
            await batcher.submit(["f"], 1)
        third.cancel()
        return got

    assert asyncio.run(scenario()) == [["a"], ["b", "c"]]


def test_request_bodies_decode_as_the_standard_library_decodes_them():
    from searchgym.retrieval.batching import decode_json as _loads

    for body in (b'{"queries": ["\xc3\xa9"], "topk": 3}', b'{"topk": NaN}', b'{"queries": ["\\ud800"]}',
                 b'{"topk": ' + b"9" * 30 + b"}", b'{"a": 1, "a": 2}', b"[1.5e3, -0, 1e400]"):
        got, want = _loads(body), json.loads(body)
        assert repr(got) == repr(want) and type(got.get("topk") if isinstance(got, dict) else got) is type(
            want.get("topk") if isinstance(want, dict) else want
        )
    for body in (b"[" * 5000 + b"]" * 5000, b"\xff", b'{"queries": ', b""):
        with pytest.raises((ValueError, RecursionError)) as caught:
            _loads(body)
        with pytest.raises(caught.type):
            json.loads(body)


def test_a_failing_retriever_gives_500_and_the_server_keeps_serving(bm25):
    class Flaky:
        """Fails its first two searches: the warm-up (the server starts anyway) and the first request."""

        def __init__(self):
            self.failures = 2

        def search(self, queries, k):
            if self.failures:
                self.failures -= 1
                raise RuntimeError("index on fire")
            return bm25.search(queries, k)

        def describe(self):
            return bm25.describe()

    with BackgroundServer(Flaky()) as server:
        with pytest.raises(RetrievalError, match="500.*index on fire"):
            HTTPRetriever(server.url).search(["Rome"], 1)
        assert HTTPRetriever(server.url).search(["Rome"], 1)[0][0].doc.id == "d1"


def test_killed_server_raises_within_the_timeout(bm25):
    server = BackgroundServer(bm25).start()
    client = HTTPRetriever(HTTPRetrieverConfig(url=server.url, timeout_s=2.0, retries=2, backoff_s=0.1))
    assert client.search(["Rome"], 1)[0][0].doc.id == "d1"
    server.stop()
    start = time.monotonic()
    with pytest.raises(RetrievalError) as raised:
        client.search(["Rome"], 1)
    assert time.monotonic() - start < 2.0 and "3 attempt" in str(raised.value)


def test_hung_server_raises_a_timeout_within_the_budget():
    # Accepts connections and reads requests, but never answers.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    try:
        client = HTTPRetriever(
            HTTPRetrieverConfig(url=f"http://127.0.0.1:{listener.getsockname()[1]}/retrieve", timeout_s=1.0)
        )
        start = time.monotonic()
        with pytest.raises(RetrievalTimeout):
            client.search(["Rome"], 1)
        assert 0.9 < time.monotonic() - start < 2.0
    finally:
        stop.set()
        for conn in held:
            conn.close()
        listener.close()


class _Scripted(BaseHTTPRequestHandler):
    """Answers with the next (status, body) in `script`."""

    script: list = []
    bodies: list = []

    def do_POST(self):
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
        status, body, *headers = self.script.pop(0)
        send_reply(self, status, body, headers)

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted():
    server = LoopbackServer(_Scripted)
    yield server.httpd, server.url
    server.close()


def test_retries_transient_errors_but_not_client_errors(scripted):
    _, base = scripted
    ok = {"result": [[{"document": {"id": "7", "contents": '"T"\nbody'}, "score": 2.5}]]}
    _Scripted.script, _Scripted.bodies = [(503, b"busy"), (503, b"busy"), (200, ok)], []
    client = HTTPRetriever(HTTPRetrieverConfig(url=base, retries=2, backoff_s=0.01))  # a bare base URL gets /retrieve
    assert client.search(["q"], 3) == [[Hit(Document("7", "T", "body"), 2.5)]]
    assert _Scripted.bodies == [{"queries": ["q"], "topk": 3, "return_scores": True}] * 3

    _Scripted.script = [(400, {"detail": "bad"}), (200, ok)]
    with pytest.raises(RetrievalError, match="1 attempt.*400"):
        client.search(["q"], 3)
    _Scripted.script = [(503, b"busy")] * 3
    with pytest.raises(RetrievalError, match="3 attempt"):
        client.search(["q"], 3)
    _Scripted.script = [(200, b"<html>")]
    with pytest.raises(RetrievalError, match="invalid JSON"):
        client.search(["q"], 3)


def test_a_503_with_retry_after_is_retried_within_the_budget_not_the_retry_count(scripted, monkeypatch):
    from searchgym.retrieval import http

    _, base = scripted
    ok = {"result": [[{"document": {"id": "7", "contents": '"T"\nbody'}, "score": 2.5}]]}
    waits = []
    monkeypatch.setattr(http.time, "sleep", waits.append)
    restarting = (503, {"detail": "retriever restarting"}, ("Retry-After", "3"))
    _Scripted.script, _Scripted.bodies = [restarting] * 5 + [(200, ok)], []
    client = HTTPRetriever(HTTPRetrieverConfig(url=base, retries=0, timeout_s=30))
    assert client.search(["q"], 3) == [[Hit(Document("7", "T", "body"), 2.5)]]
    # Five waits of Retry-After capped at RETRY_AFTER_MAX_S, though retries=0.
    assert waits == [http.RETRY_AFTER_MAX_S] * 5 and len(_Scripted.bodies) == 6
    # A budget shorter than the wait: a RetrievalTimeout that says why, after one answer.
    _Scripted.script = [restarting] * 3
    with pytest.raises(RetrievalTimeout, match="Retry-After.*restarting"):
        HTTPRetriever(HTTPRetrieverConfig(url=base, timeout_s=1.0)).search(["q"], 3)
    # A 503 without Retry-After (someone else's server) still counts against retries.
    _Scripted.script = [(503, b"busy")] * 2
    with pytest.raises(RetrievalError, match="2 attempt"):
        HTTPRetriever(HTTPRetrieverConfig(url=base, retries=1, backoff_s=0.0)).search(["q"], 3)


def test_parse_response_accepts_search_r1_variants():
    # Bare documents (return_scores ignored), title/text without id (Pyserini BM25 servers).
    body = {"result": [[{"id": "1", "contents": '"A"\nalpha'}], [{"title": "B", "text": "beta", "contents": "x"}]]}
    (a,), (b,) = parse_response(body, 2, 3)
    assert a == Hit(Document("1", "A", "alpha"), 0.0)
    assert b.doc.title == "" and b.doc.text == "x" and b.doc.id.startswith("sha1:")
    assert parse_response({"result": [[{"text": "beta", "title": "B"}]]}, 1, 3)[0][0].doc.title == "B"
    assert len(parse_response({"result": [[{"id": str(i), "contents": "c"} for i in range(5)]]}, 1, 2)[0]) == 2
    for bad in (
        {},
        {"result": [[]]},
        {"result": [{"x": 1}]},
        {"result": [[{"score": 1}]]},
        {"result": [[{"document": {"contents": "c"}, "score": "hi"}]]},
        # Values that used to escape as RecursionError, OverflowError or a NaN score.
        {"result": [[{"document": {"contents": "c", "id": nested(3000)}, "score": 1}]]},
        {"result": [[{"document": {"contents": "c"}, "score": 10**400}]]},
        {"result": [[{"document": {"contents": "c"}, "score": "nan"}]]},
        {"result": [[{"document": {"contents": "c"}, "score": True}]]},
        {"result": [[{"document": {"contents": "c", "id": False}}]]},
        {"result": [[{"text": "t", "title": nested(3000)}]]},
        {"result": nested(3000)},
    ):
        with pytest.raises(RetrievalAnswerError):
            parse_response(bad, 1 if bad.get("result") != [[]] else 2, 3)
    # Scores that servers send as strings or integers are numbers all the same.
    assert parse_response({"result": [[{"document": {"contents": "c", "id": 5}, "score": "0.5"}]]}, 1, 3)[0][0] == Hit(
        Document("5", "", "c"), 0.5)


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"]" * 100_000,  # deeper than json's decoder goes: RecursionError
    b'{"result": [[{"contents": "c", "score": ' + b"1" * 5000 + b"}]]}",  # past Python's 4300-digit limit: ValueError
    b'{"result": [[{"contents": "\xff\xfe"}]]}',  # not UTF-8
    b"",
])
def test_an_unreadable_answer_is_a_retrieval_answer_error(scripted, body):
    _, base = scripted
    _Scripted.script, _Scripted.bodies = [(200, body)], []
    with pytest.raises(RetrievalAnswerError, match="invalid JSON"):
        HTTPRetriever(HTTPRetrieverConfig(url=base, retries=0)).search(["q"], 3)


def test_config_errors():
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="http"):
        HTTPRetrieverConfig(url="localhost:8000")
    with pytest.raises(ConfigError, match="timeout"):
        HTTPRetrieverConfig(url="http://127.0.0.1:1", timeout_s=0)
    with pytest.raises(ConfigError, match="default_topk"):
        ServerConfig(default_topk=10, max_topk=5)


def test_env_uses_a_server_by_url(bm25, small_records):
    from searchgym.envs import SearchQAEnv

    with BackgroundServer(bm25) as server:
        env = SearchQAEnv(small_records, retriever=server.url, top_k=2, candidates=5)
        env.reset(options={"index": 1})
        _, _, _, _, info = env.step("<search>who discovered radioactivity</search>")
        assert info["shown"][0]["id"] == "d5" and info["candidates"]["ids"] == [
            h.doc.id for h in bm25.search(["who discovered radioactivity"], 5)[0]
        ]


def test_serve_command_checks_its_arguments(tmp_path, ten_doc_corpus):
    from searchgym.cli.serve import build_retriever
    from searchgym.errors import ConfigError
    from tests.retrieval.conftest import write_jsonl

    with pytest.raises(ConfigError, match="needs --corpus"):
        build_retriever("bm25", None, None, None)
    with pytest.raises(ConfigError, match="needs --corpus"):
        build_retriever("hybrid", None, str(tmp_path), None)
    with pytest.raises(ConfigError, match="needs --index"):
        build_retriever("dense", None, None, None)
    served = build_retriever(None, str(write_jsonl(tmp_path / "c.jsonl", ten_doc_corpus)), None, str(tmp_path / "cache"))
    assert served.describe()["kind"] == "bm25" and served.describe()["corpus_hash"] == ten_doc_corpus.content_hash


def test_retrieve_fast_path_matches_the_routed_app(bm25):
    """`POST /retrieve` skips FastAPI's middleware; other methods and paths still take the usual route, and
    an unexpected failure inside the endpoint is still a plain 500, not a dropped connection."""
    import asyncio

    import httpx

    from searchgym.retrieval.server import create_app

    class Broken:
        def search(self, queries, k):
            return [[Hit("not a document", 1.0)] for _ in queries]  # rendering it raises AttributeError

        def describe(self):
            return {"kind": "broken"}

    async def ask(retriever, method, path, **kw):
        app = create_app(retriever, ServerConfig(warmup=False))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.request(method, path, **kw)

    ok = asyncio.run(ask(bm25, "POST", "/retrieve", json={"queries": ["Tiber"], "topk": 1, "return_scores": True}))
    assert ok.status_code == 200 and ok.json()["result"][0][0]["document"]["id"] == "d7"
    assert asyncio.run(ask(bm25, "GET", "/retrieve")).status_code == 405
    assert asyncio.run(ask(bm25, "GET", "/health")).json()["status"] == "ok"
    broken = asyncio.run(ask(Broken(), "POST", "/retrieve", json={"queries": ["x"]}))
    assert (broken.status_code, broken.text) == (500, "Internal Server Error")


def test_response_encoding_is_the_same_without_orjson(monkeypatch):
    from searchgym.retrieval import batching

    body = {"result": [[{"document": {"id": "é", "contents": '"T"\nx'}, "score": 1.25e-07}]]}
    fast = batching._dumps(body)
    monkeypatch.setattr(batching, "orjson", None)
    assert json.loads(batching._dumps(body)) == json.loads(fast) == body


def test_serve_sets_the_switch_interval_only_when_asked():
    import sys

    from searchgym.errors import ConfigError
    from searchgym.retrieval.server import _set_switch_interval

    before = sys.getswitchinterval()
    try:
        _set_switch_interval(ServerConfig(switch_interval_us=250.0))
        assert sys.getswitchinterval() == pytest.approx(250e-6)
        _set_switch_interval(ServerConfig(switch_interval_us=None))
        assert sys.getswitchinterval() == pytest.approx(250e-6)  # None leaves it alone
    finally:
        sys.setswitchinterval(before)
    for bad in (0.0, -5.0):
        with pytest.raises(ConfigError, match="switch_interval_us"):
            ServerConfig(switch_interval_us=bad)
