"""The `server` surface: `POST /retrieve` on the Search-R1-compatible server's ASGI app, through httpx."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from searchgym.corpus import Corpus
from tools.fuzz.env import FUZZ_DOCS
from tools.fuzz.outcomes import TIME_LIMIT_S, Outcome, crash, describe_exception
from tools.fuzz.strategies import ANY_CHARACTER, RAW_TOKENS, dumps, json_leaves, json_values



@dataclass(frozen=True)
class HTTPCase:
    body: bytes
    content_type: str = "application/json"

    def __repr__(self) -> str:
        return f"HTTPCase({len(self.body)} bytes, {self.body[:200]!r}..., {self.content_type!r})"


def fuzz_server_config():
    """The server's caps, small so that going past them is cheap."""
    from searchgym.retrieval.server import ServerConfig

    return ServerConfig(port=0, max_topk=20, max_queries=32, max_query_chars=500, max_body_bytes=64 * 1024,
                        warmup=False)


_QUERY_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(ANY_CHARACTER, max_size=20),  # lone surrogates reach the server as \\u escapes
    st.sampled_from(["Rome", "river Tiber", "", "   ", "\x00", "the", "x" * 501, "é" * 600]),
)


@st.composite
def server_cases(draw) -> HTTPCase:
    """A `/retrieve` body: well-formed, wrong-typed, over a cap, not JSON or not UTF-8."""
    kind = draw(st.sampled_from(["request", "request", "request", "many", "json", "bytes", "raw", "oversized",
                                 "long_query", "encoded"]))
    content_type = draw(st.sampled_from(["application/json", "application/json", "text/plain", "",
                                         "application/x-www-form-urlencoded"]))
    if kind in ("request", "encoded"):
        body: dict[str, Any] = {}
        if draw(st.integers(0, 5)):
            body["queries"] = draw(st.one_of(st.lists(_QUERY_TEXT, max_size=4), json_values(4)))
        if draw(st.booleans()):
            body["topk"] = draw(st.one_of(
                st.integers(-5, 30), st.integers(10**3, 10**30), st.sampled_from(RAW_TOKENS), json_leaves(),
                st.lists(st.integers(), max_size=2)))
        if draw(st.booleans()):
            body["return_scores"] = draw(st.one_of(st.booleans(), json_leaves()))
        if draw(st.integers(0, 4)) == 0:
            body[draw(st.text(max_size=10))] = draw(json_values(3))
        text = dumps(body)
        encoding = draw(st.sampled_from(["utf-16", "utf-32", "latin-1"])) if kind == "encoded" else "utf-8"
        return HTTPCase(text.encode(encoding, "replace"), content_type)
    if kind == "many":
        n = draw(st.integers(0, 100))
        return HTTPCase(dumps({"queries": ["Rome river"] * n, "topk": 2}).encode(), content_type)
    if kind == "json":
        return HTTPCase(dumps(draw(json_values())).encode(), content_type)
    if kind == "bytes":
        return HTTPCase(draw(st.binary(max_size=300)), content_type)
    if kind == "raw":
        return HTTPCase(('{"queries": ["Rome"], "topk": ' + draw(st.sampled_from(RAW_TOKENS)) + "}").encode(), content_type)
    if kind == "oversized":
        pad = draw(st.integers(64 * 1024, 256 * 1024))
        return HTTPCase(('{"queries": ["Rome"],' + " " * pad + '"topk": 1}').encode(), content_type)
    n = draw(st.integers(501, 5000))
    return HTTPCase(dumps({"queries": ["a" * n], "topk": 1}).encode(), content_type)


class ServerHarness:
    """The server's ASGI app (started, with its batcher) driven through httpx in a private event loop."""

    def __init__(self, timeout_s: float = TIME_LIMIT_S):
        import httpx

        from searchgym.retrieval import BM25Retriever
        from searchgym.retrieval.server import create_app

        retriever = BM25Retriever(Corpus(FUZZ_DOCS, name="fuzz"), cache_dir=False)
        retriever.search(["Rome river"], 1)  # numba compiles on the first search
        self.config = fuzz_server_config()
        self.app = create_app(retriever, self.config)
        self._loop = asyncio.new_event_loop()
        self._lifespan = self.app.router.lifespan_context(self.app)
        self._loop.run_until_complete(self._lifespan.__aenter__())
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://fuzz", timeout=timeout_s)
        self.timeout_s = timeout_s

    def run(self, case: HTTPCase) -> Outcome:
        headers = {"content-type": case.content_type} if case.content_type else {}
        try:
            response = self._loop.run_until_complete(
                asyncio.wait_for(self.client.post("/retrieve", content=case.body, headers=headers), self.timeout_s)
            )
        except (asyncio.TimeoutError, TimeoutError):
            return crash(f"no response within {self.timeout_s:g} s")
        except Exception as e:  # noqa: BLE001 - the transport raising is a crash too
            return crash(describe_exception(e))
        return http_outcome(response.status_code, response.content, case.body)

    def close(self) -> None:
        self._loop.run_until_complete(self.client.aclose())
        self._loop.run_until_complete(self._lifespan.__aexit__(None, None, None))
        self._loop.close()


def http_outcome(status: int, content: bytes, request_body: bytes) -> Outcome:
    """The outcome of one `/retrieve` exchange; anything but 200 or a 4xx with a message is a crash."""
    try:
        answer = json.loads(content)
    except ValueError:
        return crash(f"HTTP {status} with a body that is not JSON: {content[:200]!r}")
    if status == 200:
        expected = _query_count(request_body)
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, list) or (expected is not None and len(result) != expected):
            return crash(f"contract: HTTP 200 with {len(result) if isinstance(result, list) else 'no'} result lists "
                          f"for {expected} queries")
        return Outcome("http 200")
    if 400 <= status < 500:
        detail = answer.get("detail") if isinstance(answer, dict) else None
        if not isinstance(detail, str) or not detail.strip():
            return crash(f"contract: HTTP {status} without a message: {content[:200]!r}")
        return Outcome(f"http {status}")
    return crash(f"HTTP {status}: {content[:300]!r}")


def _query_count(body: bytes) -> int | None:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    queries = payload.get("queries") if isinstance(payload, dict) else None
    return len(queries) if isinstance(queries, list) else None
