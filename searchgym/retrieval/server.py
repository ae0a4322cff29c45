"""A retrieval server speaking Search-R1's protocol (FastAPI + uvicorn), for any `Retriever`.

- `POST /retrieve` with `{"queries": [...], "topk": k, "return_scores": bool}` answers
  `{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}` with `return_scores`, else
  `{"result": [[{"id", "contents"}, ...], ...]}`, exactly as Search-R1's `retrieval_server.py`; `topk`
  may be omitted (the server's default is used). Search-R1, veRL and SkyRL clients work unchanged.
- `GET /health` answers `{"status": "ok", "retriever": <describe()>, "documents": n, "stats": {...}}`.

Concurrent requests are batched: while the retriever answers one batch (in a thread of its own, so the
event loop keeps accepting requests), new requests queue up, and the next retriever call takes all of them
(up to `max_batch_queries`) as soon as the previous one returns, without waiting for the event loop.
Under load this turns many one-query requests into few batched calls; alone, a request waits for nothing.
With `ServerConfig.retriever_process` (what `searchgym serve` uses) the retriever runs in a child process
instead (`searchgym.retrieval.worker`), batching the same way, so that it never shares a GIL with the
event loop.
Requests are capped (body bytes, queries, query length, topk) and refused with 413/422 and a message,
never truncated silently.

Run it with `searchgym serve ...`, or `serve(retriever, ServerConfig(...))`, or in a background thread
with `BackgroundServer` (tests, notebooks). Needs the `server` extra: `pip install 'searchgym[server]'`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
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
    switch_interval_us: float | None = 200.0
    """Python's GIL switch interval (`sys.setswitchinterval`), in microseconds, that `serve` sets for its
    process: the event loop and the retriever thread then hand the GIL to each other this often, where
    Python's default (5 ms) lets a retriever whose search just returned wait behind a busy loop. 200 us
    gave 8-15% more BM25 queries/s with 16 clients here. None leaves the interval alone;
    `BackgroundServer` never changes it (it shares its process with other code)."""
    retriever_process: bool = False
    """Run the retriever in a child process (`searchgym.retrieval.worker`) instead of a thread of the
    server's process, so that searching and serving HTTP never wait for each other's GIL. The child builds
    the retriever from what `serve` is given, which must then pickle: a zero-argument factory (what
    `searchgym serve` passes), or a retriever object (copied into the child). `searchgym serve` turns it on."""
    retriever_start_timeout_s: float = 1800.0
    """With `retriever_process`: the longest wait for the child to build its retriever and warm it up, at
    start and at every restart. A child not ready by then is killed and the start fails with a
    `RetrievalError` (a restart is tried again later), instead of the server waiting forever on a child
    that hangs. Loading a large index takes minutes: raise this for those."""
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
        if self.switch_interval_us is not None and not self.switch_interval_us > 0:
            raise ConfigError(f"ServerConfig.switch_interval_us must be > 0 or None, got {self.switch_interval_us}")
        if not self.retriever_start_timeout_s > 0:
            raise ConfigError(f"ServerConfig.retriever_start_timeout_s must be > 0, got {self.retriever_start_timeout_s}")
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
    restarts: int = 0
    """Retriever processes started again after one died (`ServerConfig.retriever_process`)."""


class _Batcher:
    """Queues jobs and runs them through the retriever in batches, one retriever call at a time.

    The retriever runs in a thread of its own that takes the next batch itself as soon as a call
    returns: the event loop only queues jobs and hands results back to their requests. So while the loop
    writes one batch's responses and reads the next requests, the retriever is already searching the
    jobs that queued up meanwhile (a search kernel that releases the GIL, such as BM25's, then overlaps
    with the loop's work instead of waiting for it).
    """

    def __init__(self, retriever: Retriever, config: ServerConfig):
        self.retriever, self.config = retriever, config
        self.stats = BatchStats()
        self._pending: deque[_Job] = deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # One worker: retrievers need not be thread-safe, and batching replaces parallel calls.
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="searchgym-retriever", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        with self._ready:
            self._stopping = True
            left, self._pending = list(self._pending), deque()
            self._ready.notify()
        for job in left:
            if not job.future.done():
                job.future.set_exception(RetrievalError("server shutting down"))
        # The worker is not joined: a search in progress finishes in its daemon thread, and its results
        # go nowhere (`_deliver` is never scheduled on a closed loop).

    async def submit(self, queries: list[str], k: int) -> list[list[Hit]]:
        assert self._loop is not None, "the batcher is not started"
        job = _Job(queries, k, self._loop.create_future())
        with self._ready:
            if self._stopping:
                raise RetrievalError("server shutting down")
            self._pending.append(job)
            self._ready.notify()
        return await job.future

    def _work(self) -> None:
        """The retriever thread: take what queued up, search it, hand the results to the loop, repeat."""
        wait_s = self.config.batch_wait_ms / 1000
        while True:
            with self._ready:
                idle = not self._pending
                while not self._pending and not self._stopping:
                    self._ready.wait()
                if self._stopping:
                    return
            if idle and wait_s:  # after an idle spell, wait a little for more requests to join this batch
                time.sleep(wait_s)
            with self._ready:
                if self._stopping:
                    return
                jobs = self._take()
            started = time.perf_counter()
            outcome: list[list[list[Hit]]] | None = None
            error: Exception | None = None
            try:
                outcome = search_groups(self.retriever, [(job.queries, job.k) for job in jobs])
            except Exception as e:  # a retriever failure fails this batch's requests, not the server
                logger.exception("retriever failed on a batch of %d requests", len(jobs))
                self.stats.errors += len(jobs)
                error = e
            self.stats.busy_s += time.perf_counter() - started
            try:
                self._loop.call_soon_threadsafe(self._deliver, jobs, outcome, error)  # type: ignore[union-attr]
            except RuntimeError:  # the loop closed while this batch was searched: nobody waits for it
                return

    @staticmethod
    def _deliver(jobs: list[_Job], outcome: list[list[list[Hit]]] | None, error: Exception | None) -> None:
        for i, job in enumerate(jobs):
            if job.future.done():  # the client went away
                continue
            if outcome is None:
                job.future.set_exception(error or RetrievalError("retrieval failed"))
            else:
                job.future.set_result(outcome[i])

    def _take(self) -> list[_Job]:
        """The next batch (called with the lock held)."""
        jobs = take_batch(self._pending, self.config.max_batch_queries, lambda job: len(job.queries))
        total = sum(len(job.queries) for job in jobs)
        self.stats.requests += len(jobs)
        self.stats.queries += total
        self.stats.retriever_calls += 1
        self.stats.largest_batch = max(self.stats.largest_batch, total)
        return jobs


def take_batch(pending: deque, limit: int, size: Callable[[Any], int]) -> list:
    """Jobs from the front of `pending` (removed from it) while their queries add up to at most `limit`,
    and always the first one, however large (it is capped per request)."""
    jobs = [pending.popleft()]
    total = size(jobs[0])
    while pending and total + size(pending[0]) <= limit:
        jobs.append(pending.popleft())
        total += size(jobs[-1])
    return jobs


def search_groups(retriever: Retriever, requests: Sequence[tuple[list[str], int]]) -> list[list[list[Hit]]]:
    """The hits for each (queries, k) request: one retriever call per distinct k among them (usually
    one), the results split back per request."""
    out: list[list[list[Hit]] | None] = [None] * len(requests)
    for k in sorted({k for _, k in requests}):
        members = [i for i, (_, kk) in enumerate(requests) if kk == k]
        queries = [q for i in members for q in requests[i][0]]
        hits = retriever.search(queries, k) if queries else []
        pos = 0
        for i in members:
            n = len(requests[i][0])
            out[i] = hits[pos : pos + n]
            pos += n
    return out  # type: ignore[return-value]


def create_app(retriever: Retriever | Callable[[], Retriever], config: ServerConfig | None = None):
    """The FastAPI application serving `retriever` (with `config.retriever_process`, a factory of one
    works too: it is called in the retriever process)."""
    config = config or ServerConfig()
    if config.retriever_process:
        from searchgym.retrieval.worker import RetrieverProcess

        factory = retriever if not isinstance(retriever, Retriever) else functools.partial(_given, retriever)
        worker: RetrieverProcess | None = RetrieverProcess(factory, config, BatchStats())
        batcher = None
        stats = worker.stats
    else:
        if not isinstance(retriever, Retriever):
            raise ConfigError("create_app needs a Retriever (a factory only with ServerConfig.retriever_process)")
        worker = None
        batcher = _Batcher(retriever, config)
        stats = batcher.stats
        description, num_docs = retriever.describe(), _num_docs(retriever)

    @asynccontextmanager
    async def lifespan(app):
        if worker is not None:
            try:
                await worker.start()
            except RetrievalError as e:
                app.state.startup_error = str(e)
                raise
            yield
            await worker.stop()
            return
        if config.warmup:
            await asyncio.get_running_loop().run_in_executor(None, _warm_up, retriever)
        batcher.start()
        yield
        await batcher.stop()

    app = _RetrievalApp(title="searchgym retrieval server", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.worker = worker

    def _json(body: Any, status: int = 200) -> Response:
        return Response(_encode(body), status_code=status, media_type="application/json")

    async def retrieve(scope, receive) -> tuple[int, bytes] | None:
        """`POST /retrieve`: the status and JSON body of the answer, None when the client went away."""
        try:
            body = await _read_body(scope, receive, config.max_body_bytes)
            if body is None:
                return None
            try:
                payload = _loads(body)
            except RecursionError:
                raise RequestRejected(422, "the body's JSON is nested too deeply") from None
            except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer of over 4300 digits
                raise RequestRejected(422, f"the body is not valid JSON: {e}") from None
            req = parse_retrieve_request(payload, config)
        except RequestRejected as e:
            return e.status, _encode({"detail": str(e)})
        try:
            if worker is not None:  # the retriever process encodes the answer itself
                return await worker.submit(req.queries, req.topk, req.return_scores)
            hits = await batcher.submit(req.queries, req.topk)
        except Exception as e:
            return 500, _encode({"detail": f"retrieval failed: {type(e).__name__}: {e}"})
        return 200, _encode(render_results(hits, req.return_scores))

    @app.get("/health")
    async def health() -> Response:
        if worker is not None:
            if worker.error is not None:
                return _json({"status": "error", "detail": worker.error, "stats": vars(stats)}, 503)
            return _json({"status": "ok", "retriever": worker.description, "documents": worker.num_docs, "stats": vars(stats)})
        return _json({"status": "ok", "retriever": description, "documents": num_docs, "stats": vars(stats)})

    # `_RetrievalApp` answers `POST /retrieve` before routing; the route is there so that another method
    # gets Starlette's 405, as for any POST-only path.
    app.router.routes.append(Route("/retrieve", _unreachable, methods=["POST"]))
    app.retrieve_endpoint = retrieve
    return app


def _given(retriever: Retriever) -> Retriever:
    """A factory of an existing retriever (pickled into the retriever process with it)."""
    return retriever


async def _unreachable(request) -> Response:
    raise AssertionError("POST /retrieve is answered by _RetrievalApp before routing")


_JSON = b"application/json"


class _RetrievalApp(FastAPI):
    """FastAPI, with `POST /retrieve` answered in plain ASGI before FastAPI's middleware and routing.

    Those layers (error and exception middleware, the exit stack, route matching, `Request` and
    `Response` objects) cost more per request than a BM25 search, and the server runs them on one event
    loop for every client. `/retrieve` needs none of them: it reads, caps and validates its body itself,
    turns every failure into a JSON answer, and sends the two ASGI messages of the response directly.
    Anything it still raises gets the same plain 500 that Starlette's error middleware sends. Every other
    path (`/health`, `/docs`, a wrong method) takes the usual route.
    """

    retrieve_endpoint = None

    async def __call__(self, scope, receive, send) -> None:
        endpoint = self.retrieve_endpoint
        if endpoint is None or scope["type"] != "http" or scope["path"] != "/retrieve" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        media = _JSON
        try:
            answer = await endpoint(scope, receive)
        except Exception:  # answered as a 500, as the error middleware would
            logger.exception("/retrieve failed")
            answer, media = (500, b"Internal Server Error"), b"text/plain; charset=utf-8"
        if answer is None:  # the client disconnected before sending its whole request
            return
        status, data = answer
        await send({
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", media), (b"content-length", b"%d" % len(data))],
        })
        await send({"type": "http.response.body", "body": data})


def _encode(body: Any) -> bytes:
    # Serialized directly: FastAPI's generic encoder walks every nested value and costs more than the
    # search. orjson (the server extra) writes the same compact UTF-8 JSON several times faster.
    try:
        return _dumps(body)
    except (UnicodeEncodeError, TypeError):  # orjson's JSONEncodeError is a TypeError
        # A lone surrogate (from a corpus built in code, or echoed from a query) has no UTF-8 form;
        # ASCII JSON writes it as a \uXXXX escape, which every JSON reader accepts.
        return json.dumps(body, separators=(",", ":")).encode()


def _loads(body: bytes) -> Any:
    """`json.loads(body)` for a request body, through orjson where installed (several times faster).
    What orjson refuses (NaN, escaped lone surrogates, deep nesting, bad UTF-8) goes to the standard
    library, and so does a float `topk` (orjson reads an integer past 64 bits as a float), so that the
    server accepts and rejects exactly what `json.loads` does, with its messages."""
    if orjson is not None:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
        else:
            if not (isinstance(payload, dict) and isinstance(payload.get("topk"), float)):
                return payload
    return json.loads(body)


def _dumps(body: Any) -> bytes:
    """Compact UTF-8 JSON; raises UnicodeEncodeError or TypeError for a string holding a lone surrogate."""
    if orjson is not None:
        return orjson.dumps(body)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def _read_body(scope, receive, limit: int) -> bytes | None:
    """The request body, refused past `limit` bytes (declared or sent); None when the client disconnects."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise RequestRejected(413, f"request body of {value.decode()} bytes; this server accepts at most {limit}")
            break
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestRejected(413, f"request body over {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
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


def serve(retriever: Retriever | Callable[[], Retriever], config: ServerConfig | None = None, *, log_level: str = "info") -> None:
    """Serve `retriever` in the foreground until interrupted."""
    import uvicorn

    config = config or ServerConfig()
    _set_switch_interval(config)
    uvicorn.Server(_uvicorn_config(create_app(retriever, config), config, log_level)).run()


def _set_switch_interval(config: ServerConfig) -> None:
    """Python's GIL switch interval for a process that runs the server and nothing else (`serve`)."""
    if config.switch_interval_us is not None:
        sys.setswitchinterval(config.switch_interval_us / 1e6)


class BackgroundServer:
    """Runs the server in a daemon thread; use as a context manager. `url` is the `/retrieve` endpoint.

    With `port=0` (the default here) the OS picks a free port, so parallel test runs never collide.
    """

    def __init__(self, retriever: Retriever | Callable[[], Retriever], config: ServerConfig | None = None, *,
                 startup_timeout_s: float = 15.0):
        import uvicorn

        self.config = config or ServerConfig(port=0)
        self.app = create_app(retriever, self.config)
        self._server = uvicorn.Server(_uvicorn_config(self.app, self.config, "warning"))
        self._thread = threading.Thread(target=self._run, name="searchgym-retrieval-server", daemon=True)
        self._startup_timeout_s = startup_timeout_s
        self.port: int | None = None

    def _run(self) -> None:
        try:
            self._server.run()
        except SystemExit:  # uvicorn exits when startup fails; `start` reports why
            pass

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                why = getattr(self.app.state, "startup_error", None)
                raise RetrievalError(
                    f"retrieval server did not start on {self.config.host}:{self.config.port} within {self._startup_timeout_s:g} s"
                    + (f": {why}" if why else "")
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
