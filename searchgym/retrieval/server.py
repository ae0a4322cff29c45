"""A retrieval server speaking Search-R1's protocol (FastAPI + uvicorn), for any `Retriever`.

- `POST /retrieve` with `{"queries": [...], "topk": k, "return_scores": bool}` answers
  `{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}` with `return_scores`, else
  `{"result": [[{"id", "contents"}, ...], ...]}`, exactly as Search-R1's `retrieval_server.py`; `topk`
  may be omitted (the server's default is used). Search-R1, veRL and SkyRL clients work unchanged.
- `GET /health` answers `{"status": "ok", "retriever": <describe()>, "documents": n, "stats": {...}}`.

Concurrent requests are batched: while the retriever answers one batch (in a worker thread, so the event
loop keeps accepting requests), new requests queue up, and the next retriever call takes all of them
(up to `max_batch_queries`). Under load this turns many one-query requests into few batched calls;
alone, a request waits for nothing. Requests are capped (body bytes, queries, query length, topk) and
refused with 413/422 and a message, never truncated silently.

Run it with `searchgym serve ...`, or `serve(retriever, ServerConfig(...))`, or in a background thread
with `BackgroundServer` (tests, notebooks). Needs the `server` extra: `pip install 'searchgym[server]'`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.routing import Route

try:
    import orjson
except ImportError:  # the server extra installs it; without it the standard library encodes
    orjson = None

from searchgym.errors import ConfigError, RetrievalError
from searchgym.retrieval.base import Hit, Retriever

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Where the server listens and what it accepts."""

    host: str = "127.0.0.1"
    """Interface to bind; loopback by default. Bind 0.0.0.0 only on a trusted network: there is no auth."""
    port: int = 8000
    """TCP port (0 picks a free one)."""
    default_topk: int = 3
    """Documents per query when a request omits `topk` (Search-R1's server default is 3)."""
    max_topk: int = 1000
    """Largest `topk` accepted."""
    max_queries: int = 1024
    """Most queries in one request."""
    max_query_chars: int = 8192
    """Longest query accepted, in characters."""
    max_results: int = 100_000
    """Most documents in one response (queries x topk): bounds the answer's size as the other caps bound
    the request's."""
    max_body_bytes: int = 8 * 2**20
    """Largest request body accepted."""
    max_batch_queries: int = 512
    """Most queries per retriever call when batching concurrent requests."""
    batch_wait_ms: float = 0.0
    """Extra time to wait for more requests before a retriever call; 0 batches only what queued up during
    the previous call, which adds no latency."""
    warmup: bool = True
    """Run one search before accepting requests, so that lazy model loading and JIT compilation (BM25's
    numba kernels take seconds) never land on the first client's request."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"ServerConfig.port must be in 0..65535, got {self.port}")
        for name in (
            "default_topk",
            "max_topk",
            "max_queries",
            "max_query_chars",
            "max_results",
            "max_body_bytes",
            "max_batch_queries",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"ServerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.default_topk > self.max_topk:
            raise ConfigError(f"ServerConfig.default_topk ({self.default_topk}) exceeds max_topk ({self.max_topk})")
        if self.batch_wait_ms < 0:
            raise ConfigError(f"ServerConfig.batch_wait_ms must be >= 0, got {self.batch_wait_ms}")


class RequestRejected(Exception):
    """A request the server refuses; carries the HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RetrieveRequest:
    queries: list[str]
    topk: int
    return_scores: bool


def parse_retrieve_request(payload: Any, config: ServerConfig) -> RetrieveRequest:
    """Validate a decoded `/retrieve` body against Search-R1's schema and the server's caps."""
    if not isinstance(payload, dict):
        raise RequestRejected(422, "the body must be a JSON object with 'queries', optional 'topk' and 'return_scores'")
    queries = payload.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise RequestRejected(422, "'queries' must be a list of strings")
    if len(queries) > config.max_queries:
        raise RequestRejected(
            413, f"{len(queries)} queries in one request; this server accepts at most {config.max_queries}"
        )
    longest = max((len(q) for q in queries), default=0)
    if longest > config.max_query_chars:
        raise RequestRejected(
            413, f"a query has {longest} characters; this server accepts at most {config.max_query_chars}"
        )
    topk = payload.get("topk")
    if topk is None or topk == 0:  # Search-R1's server treats a missing or zero topk as its default
        topk = config.default_topk
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 0:
        raise RequestRejected(422, f"'topk' must be a non-negative integer, got {topk!r}")
    if topk > config.max_topk:
        raise RequestRejected(413, f"topk={topk}; this server returns at most {config.max_topk} documents per query")
    if len(queries) * topk > config.max_results:
        raise RequestRejected(
            413, f"{len(queries)} queries x topk={topk} = {len(queries) * topk} documents; this server returns at most "
            f"{config.max_results} per response: split the queries over several requests"
        )
    return_scores = payload.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise RequestRejected(422, f"'return_scores' must be true or false, got {return_scores!r}")
    return RetrieveRequest(queries, topk, return_scores)


def render_results(hits: Sequence[Sequence[Hit]], return_scores: bool) -> dict[str, Any]:
    """Search-R1's response body."""
    if return_scores:
        return {
            "result": [
                [{"document": {"id": h.doc.id, "contents": h.doc.contents}, "score": h.score} for h in row]
                for row in hits
            ]
        }
    return {"result": [[{"id": h.doc.id, "contents": h.doc.contents} for h in row] for row in hits]}


@dataclass
class _Job:
    queries: list[str]
    k: int
    future: asyncio.Future


@dataclass
class BatchStats:
    requests: int = 0
    queries: int = 0
    retriever_calls: int = 0
    largest_batch: int = 0
    errors: int = 0
    busy_s: float = field(default=0.0)


class _Batcher:
    """Queues jobs and runs them through the retriever in batches, one retriever call at a time."""

    def __init__(self, retriever: Retriever, config: ServerConfig):
        self.retriever, self.config = retriever, config
        self.stats = BatchStats()
        self._pending: deque[_Job] = deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        # One worker: retrievers need not be thread-safe, and batching replaces parallel calls.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retriever")

    def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for job in self._pending:
            if not job.future.done():
                job.future.set_exception(RetrievalError("server shutting down"))
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, queries: list[str], k: int) -> list[list[Hit]]:
        assert self._wakeup is not None, "the batcher is not started"
        job = _Job(queries, k, asyncio.get_running_loop().create_future())
        self._pending.append(job)
        self._wakeup.set()
        return await job.future

    async def _run(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if self.config.batch_wait_ms:
                await asyncio.sleep(self.config.batch_wait_ms / 1000)
            while self._pending:
                jobs = self._take()
                started = time.perf_counter()
                try:
                    outcome = await loop.run_in_executor(self._executor, self._search_groups, jobs)
                except Exception as e:  # a retriever failure fails this batch's requests, not the server
                    logger.exception("retriever failed on a batch of %d requests", len(jobs))
                    self.stats.errors += len(jobs)
                    for job in jobs:
                        if not job.future.done():
                            job.future.set_exception(e)
                    continue
                finally:
                    self.stats.busy_s += time.perf_counter() - started
                for job, hits in zip(jobs, outcome):
                    if not job.future.done():  # the client may have gone away
                        job.future.set_result(hits)

    def _take(self) -> list[_Job]:
        jobs = [self._pending.popleft()]
        total = len(jobs[0].queries)
        while self._pending and total + len(self._pending[0].queries) <= self.config.max_batch_queries:
            job = self._pending.popleft()
            jobs.append(job)
            total += len(job.queries)
        self.stats.requests += len(jobs)
        self.stats.queries += total
        self.stats.retriever_calls += 1
        self.stats.largest_batch = max(self.stats.largest_batch, total)
        return jobs

    def _search_groups(self, jobs: list[_Job]) -> list[list[list[Hit]]]:
        """One retriever call per distinct k among the jobs (usually one), results split back per job."""
        out: list[list[list[Hit]] | None] = [None] * len(jobs)
        for k in sorted({j.k for j in jobs}):
            members = [i for i, j in enumerate(jobs) if j.k == k]
            queries = [q for i in members for q in jobs[i].queries]
            hits = self.retriever.search(queries, k) if queries else []
            pos = 0
            for i in members:
                n = len(jobs[i].queries)
                out[i] = hits[pos : pos + n]
                pos += n
        return out  # type: ignore[return-value]


def create_app(retriever: Retriever, config: ServerConfig | None = None):
    """The FastAPI application serving `retriever`."""
    config = config or ServerConfig()
    batcher = _Batcher(retriever, config)
    description = retriever.describe()
    num_docs = _num_docs(retriever)

    @asynccontextmanager
    async def lifespan(app):
        if config.warmup:
            await asyncio.get_running_loop().run_in_executor(batcher._executor, _warm_up, retriever)
        batcher.start()
        yield
        await batcher.stop()

    app = _RetrievalApp(title="searchgym retrieval server", lifespan=lifespan)
    app.state.batcher = batcher

    def _json(body: Any, status: int = 200) -> Response:
        # Serialized directly: FastAPI's generic encoder walks every nested value and costs more than the
        # search. orjson (the server extra) writes the same compact UTF-8 JSON several times faster.
        try:
            data = _dumps(body)
        except (UnicodeEncodeError, TypeError):  # orjson's JSONEncodeError is a TypeError
            # A lone surrogate (from a corpus built in code, or echoed from a query) has no UTF-8 form;
            # ASCII JSON writes it as a \uXXXX escape, which every JSON reader accepts.
            data = json.dumps(body, separators=(",", ":")).encode()
        return Response(data, status_code=status, media_type="application/json")

    async def retrieve(request: Request) -> Response:
        try:
            body = await _read_body(request, config.max_body_bytes)
            try:
                payload = json.loads(body)
            except RecursionError:
                raise RequestRejected(422, "the body's JSON is nested too deeply") from None
            except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer of over 4300 digits
                raise RequestRejected(422, f"the body is not valid JSON: {e}") from None
            req = parse_retrieve_request(payload, config)
        except RequestRejected as e:
            return _json({"detail": str(e)}, e.status)
        try:
            hits = await batcher.submit(req.queries, req.topk)
        except Exception as e:
            return _json({"detail": f"retrieval failed: {type(e).__name__}: {e}"}, 500)
        return _json(render_results(hits, req.return_scores))

    @app.get("/health")
    async def health() -> Response:
        return _json({"status": "ok", "retriever": description, "documents": num_docs, "stats": vars(batcher.stats)})

    # A plain Starlette route: FastAPI's dependency solving per request costs more than a BM25 search,
    # and this endpoint parses and validates its body itself (to cap its size before decoding).
    app.router.routes.append(Route("/retrieve", retrieve, methods=["POST"]))
    app.retrieve_endpoint = retrieve

    return app


class _RetrievalApp(FastAPI):
    """FastAPI, with `POST /retrieve` answered before FastAPI's middleware and routing.

    Those layers (error and exception middleware, the exit stack, route matching, a second `Request`)
    cost more per request than a BM25 search. `/retrieve` needs none of them: its endpoint reads, caps and
    validates the body itself and turns every failure into a JSON answer. Anything it still raises gets
    the same plain 500 that Starlette's error middleware sends. Every other path takes the usual route.
    """

    retrieve_endpoint = None

    async def __call__(self, scope, receive, send) -> None:
        endpoint = self.retrieve_endpoint
        if endpoint is None or scope["type"] != "http" or scope["path"] != "/retrieve" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        try:
            response = await endpoint(Request(scope, receive))
        except Exception:  # answered as a 500, as the error middleware would
            logger.exception("/retrieve failed")
            response = Response("Internal Server Error", status_code=500, media_type="text/plain")
        await response(scope, receive, send)


def _dumps(body: Any) -> bytes:
    """Compact UTF-8 JSON; raises UnicodeEncodeError or TypeError for a string holding a lone surrogate."""
    if orjson is not None:
        return orjson.dumps(body)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def _read_body(request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestRejected(413, f"request body of {declared} bytes; this server accepts at most {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestRejected(413, f"request body over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _warm_up(retriever: Retriever) -> None:
    corpus = getattr(retriever, "corpus", None)
    try:
        doc = corpus[0] if corpus is not None and len(corpus) else None
    except (TypeError, IndexError, KeyError):
        doc = None
    query = f"{doc.title} {doc.text[:200]}" if doc is not None else "the first query"
    started = time.perf_counter()
    try:
        retriever.search([query], 1)
    except Exception as e:  # the same failure will reach clients as HTTP 500; starting is still useful for /health
        logger.warning("warm-up search failed: %s: %s", type(e).__name__, e)
        return
    logger.info("warm-up search took %.2f s", time.perf_counter() - started)


def _num_docs(retriever: Retriever) -> int | None:
    corpus = getattr(retriever, "corpus", None)
    try:
        return len(corpus) if corpus is not None else None
    except TypeError:
        return None


def _uvicorn_config(app, config: ServerConfig, log_level: str):
    import uvicorn

    return uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level, access_log=False, lifespan="on")


def serve(retriever: Retriever, config: ServerConfig | None = None, *, log_level: str = "info") -> None:
    """Serve `retriever` in the foreground until interrupted."""
    import uvicorn

    config = config or ServerConfig()
    uvicorn.Server(_uvicorn_config(create_app(retriever, config), config, log_level)).run()


class BackgroundServer:
    """Runs the server in a daemon thread; use as a context manager. `url` is the `/retrieve` endpoint.

    With `port=0` (the default here) the OS picks a free port, so parallel test runs never collide.
    """

    def __init__(self, retriever: Retriever, config: ServerConfig | None = None, *, startup_timeout_s: float = 15.0):
        import uvicorn

        self.config = config or ServerConfig(port=0)
        self._server = uvicorn.Server(_uvicorn_config(create_app(retriever, self.config), self.config, "warning"))
        self._thread = threading.Thread(target=self._server.run, name="searchgym-retrieval-server", daemon=True)
        self._startup_timeout_s = startup_timeout_s
        self.port: int | None = None

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RetrievalError(
                    f"retrieval server did not start on {self.config.host}:{self.config.port} within {self._startup_timeout_s:g} s"
                )
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        if self.port is None:
            raise RetrievalError("the server is not running; call start() first")
        return f"http://{self.config.host}:{self.port}/retrieve"

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
