"""A retrieval server speaking Search-R1's protocol (FastAPI + uvicorn), for any `Retriever`.

- `POST /retrieve` with `{"queries": [...], "topk": k, "return_scores": bool}` answers
  `{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}` with `return_scores`, else
  `{"result": [[{"id", "contents"}, ...], ...]}`, exactly as Search-R1's `retrieval_server.py`; `topk`
  may be omitted (the server's default is used), else it is a positive integer (422 otherwise; Search-R1's
  server also reads 0, false and 0.0 as its default). Search-R1, veRL and SkyRL clients work unchanged.
- `GET /health` answers `{"status": "ok", "retriever": <describe()>, "documents": n, "stats": {...}}`;
  while the retriever process restarts, 503 with `{"status": "restarting", ...}` and `Retry-After`, and
  `/retrieve` answers 503 with `Retry-After` (see `searchgym.retrieval.worker`).

Concurrent requests are batched: while the retriever answers one batch (in a thread of its own, so the
event loop keeps accepting requests), new requests queue up, and the next retriever call takes all of them
(up to `max_batch_queries`) as soon as the previous one returns, without waiting for the event loop.
Under load this turns many one-query requests into few batched calls; alone, a request waits for nothing.
With `ServerConfig.retriever_process` (what `searchgym serve` uses) the retriever runs in a child process
instead (`searchgym.retrieval.worker`), batching the same way, so that it never shares a GIL with the
event loop. What the two ways share (batching, the answer body, the JSON encoding, the warm-up) is in
`searchgym.retrieval.batching`, which the child imports without this module or FastAPI.
Requests are capped (body bytes, queries, query length, topk) and refused with 413/422 and a message,
never truncated silently. Slow clients are bounded: request headers within `header_timeout_s`, the body
within `body_timeout_s` (408 otherwise), idle kept-alive connections closed after `keep_alive_timeout_s`,
at most `max_connections` open, request heads capped in size and header count as they arrive (414/431;
`searchgym.retrieval.connections`).

Run it with `searchgym serve ...`, or `serve(retriever, ServerConfig(...))`, or in a background thread
with `BackgroundServer` (tests, notebooks). Needs the `server` extra: `pip install 'searchgym[server]'`.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import sys
import threading
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import Response
from starlette.routing import Route

from searchgym.errors import ConfigError, RetrievalError, RetrieverRestarting
from searchgym.retrieval.asgi import RequestRejected, RetrievalApp, read_body, retry_after, retry_after_s, unreachable
from searchgym.retrieval.base import Retriever
from searchgym.retrieval.batching import Batcher, BatchStats, decode_json, encode_json, num_docs, render_results, warm_up

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Where the server listens and what it accepts."""

    host: str = "127.0.0.1"
    """Interface to bind; loopback by default. Any other address needs `allow_remote` (and should have an
    `api_key`): it serves every machine that can reach it."""
    allow_remote: bool = False
    """Allow a `host` that is not loopback (`--allow-remote`). Without it such a host is refused."""
    api_key: str | None = field(default=None, repr=False)
    """When set, every request must carry it, as `Authorization: Bearer <key>` or `X-API-Key: <key>`
    (compared in constant time); others get 401. `HTTPRetrieverConfig.api_key` sends it. At least 16
    characters. Search-R1's own client sends no headers: use it only on loopback, without a key."""
    port: int = 8000
    """TCP port (0 picks a free one)."""
    default_topk: int = 3
    """Documents per query when a request omits `topk` (Search-R1's server default is 3)."""
    max_topk: int = 1000
    """Largest `topk` accepted."""
    max_queries: int = 8192
    """Most queries in one request. Search-R1's default training step sends its whole batch in one request
    (512 prompts x 5 rollouts = 2,560 queries), and its client fails with `KeyError: 'result'` on any
    refusal, so the default leaves room for three times that."""
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
    header_timeout_s: float = 10.0
    """A connection must deliver complete request headers this long after it opens (or after the first
    byte of its next request); otherwise it is closed (with 408 if a request had begun). Bounds what idle
    and slowly dribbling clients can hold (`searchgym.retrieval.connections`)."""
    body_timeout_s: float = 30.0
    """A request body must arrive whole this long after its headers; otherwise 408 (a body shorter than
    its `Content-Length` is one such)."""
    keep_alive_timeout_s: float = 5.0
    """A kept-alive connection idle this long after a response is closed (uvicorn's `timeout_keep_alive`)."""
    max_connections: int = 1000
    """Most connections open at once; one more is answered 503 and closed at once. Keep it under the
    process's file limit (`ulimit -n`)."""
    max_request_line_bytes: int = 8192
    """Longest request line (method, target, version) accepted; a longer one is answered 414 and the
    connection closed, as its bytes arrive."""
    max_header_bytes: int = 32768
    """Most bytes of a request's head (request line and header lines) accepted; beyond it 431 and the
    connection closed, as its bytes arrive. With `max_connections` it bounds what clients can make the
    server hold before their requests are authenticated or answered."""
    max_header_fields: int = 100
    """Most header lines in one request; one more is answered 431 and the connection closed."""
    warmup: bool = True
    """Run one search before accepting requests, so that lazy model loading and JIT compilation (BM25's
    numba kernels take seconds) never land on the first client's request."""

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.allow_remote:
            raise ConfigError(
                f"ServerConfig.host={self.host!r} is not loopback: the server would answer every machine that can reach "
                "it. Pass allow_remote=True (--allow-remote) to mean it, with an api_key (--api-key-file) so that only "
                "your clients are answered"
            )
        if self.api_key is not None and (not isinstance(self.api_key, str) or len(self.api_key.strip()) < 16):
            raise ConfigError("ServerConfig.api_key must be a string of at least 16 characters (e.g. `openssl rand -hex 16`)")
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
            "max_request_line_bytes",
            "max_header_bytes",
            "max_header_fields",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"ServerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.default_topk > self.max_topk:
            raise ConfigError(f"ServerConfig.default_topk ({self.default_topk}) exceeds max_topk ({self.max_topk})")
        if self.switch_interval_us is not None and not self.switch_interval_us > 0:
            raise ConfigError(f"ServerConfig.switch_interval_us must be > 0 or None, got {self.switch_interval_us}")
        if not self.retriever_start_timeout_s > 0:
            raise ConfigError(f"ServerConfig.retriever_start_timeout_s must be > 0, got {self.retriever_start_timeout_s}")
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"ServerConfig.{name} must be > 0, got {getattr(self, name)}")
        if self.max_connections < 1:
            raise ConfigError(f"ServerConfig.max_connections must be >= 1, got {self.max_connections}")
        if self.batch_wait_ms < 0:
            raise ConfigError(f"ServerConfig.batch_wait_ms must be >= 0, got {self.batch_wait_ms}")


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


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
            413,
            f"{len(queries)} queries in one request; this server accepts at most {config.max_queries} "
            "(ServerConfig.max_queries): restart it with a larger `searchgym serve --max-queries N`, or send the "
            "queries in smaller requests (HTTPRetrieverConfig.max_queries_per_request)",
        )
    longest = max((len(q) for q in queries), default=0)
    if longest > config.max_query_chars:
        raise RequestRejected(
            413, f"a query has {longest} characters; this server accepts at most {config.max_query_chars}"
        )
    topk = payload.get("topk")
    if topk is None:  # Search-R1's server treats a missing topk as its default
        topk = config.default_topk
    # Search-R1's server also takes 0 (and, by Python's truthiness, false and 0.0) as its default; here
    # they are what they look like, a request for no documents or a value of the wrong type.
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise RequestRejected(422, f"'topk' must be a positive integer (or omitted for the server's default "
                                   f"{config.default_topk}), got {str(topk)[:80]}")
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


def create_app(retriever: Retriever | Callable[[], Retriever], config: ServerConfig | None = None):
    """The FastAPI application serving `retriever` (with `config.retriever_process`, a factory of one
    works too: it is called in the retriever process)."""
    config = config or ServerConfig()
    if config.retriever_process:
        from searchgym.retrieval.worker import RetrieverProcess, given

        factory = retriever if not isinstance(retriever, Retriever) else functools.partial(given, retriever)
        worker: RetrieverProcess | None = RetrieverProcess(factory, config, BatchStats())
        batcher = None
        stats = worker.stats
    else:
        if not isinstance(retriever, Retriever):
            raise ConfigError("create_app needs a Retriever (a factory only with ServerConfig.retriever_process)")
        worker = None
        batcher = Batcher(retriever, config)
        stats = batcher.stats
        description, documents = retriever.describe(), num_docs(retriever)

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
            await asyncio.get_running_loop().run_in_executor(None, warm_up, retriever)
        batcher.start()
        yield
        await batcher.stop()

    app = RetrievalApp(title="searchgym retrieval server", lifespan=lifespan)
    app.api_key = config.api_key.encode() if config.api_key else None
    app.state.batcher = batcher
    app.state.worker = worker

    def _json(body: Any, status: int = 200) -> Response:
        return Response(encode_json(body), status_code=status, media_type="application/json")

    async def retrieve(scope, receive) -> tuple[int, bytes] | None:
        """`POST /retrieve`: the status and JSON body of the answer, None when the client went away."""
        try:
            body = await read_body(scope, receive, config.max_body_bytes, config.body_timeout_s)
            if body is None:
                return None
            try:
                payload = decode_json(body)
            except RecursionError:
                raise RequestRejected(422, "the body's JSON is nested too deeply") from None
            except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer of over 4300 digits
                raise RequestRejected(422, f"the body is not valid JSON: {e}") from None
            req = parse_retrieve_request(payload, config)
        except RequestRejected as e:
            return e.status, encode_json({"detail": str(e)})
        try:
            if worker is not None:  # the retriever process encodes the answer itself
                return await worker.submit(req.queries, req.topk, req.return_scores)
            hits = await batcher.submit(req.queries, req.topk)
        except RetrieverRestarting as e:
            # 503 + Retry-After: the request is fine, the retriever is briefly away; clients retry.
            return 503, encode_json({"detail": f"retriever restarting: {e}"}), retry_after(e.retry_after_s)
        except Exception as e:
            return 500, encode_json({"detail": f"retrieval failed: {type(e).__name__}: {e}"})
        return 200, encode_json(render_results(hits, req.return_scores))

    @app.get("/health")
    async def health() -> Response:
        if worker is not None:
            if worker.restarting:
                return Response(encode_json({"status": "restarting", "detail": worker.error, "stats": vars(stats)}), 503,
                                media_type="application/json", headers={"retry-after": str(retry_after_s(worker.start_s))})
            if worker.error is not None:
                return _json({"status": "error", "detail": worker.error, "stats": vars(stats)}, 503)
            return _json({"status": "ok", "retriever": worker.description, "documents": worker.num_docs, "stats": vars(stats)})
        return _json({"status": "ok", "retriever": description, "documents": documents, "stats": vars(stats)})

    # `RetrievalApp` answers `POST /retrieve` before routing; the route is there so that another method
    # gets Starlette's 405, as for any POST-only path.
    app.router.routes.append(Route("/retrieve", unreachable, methods=["POST"]))
    app.retrieve_endpoint = retrieve
    return app


def _uvicorn_config(app, config: ServerConfig, log_level: str):
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from searchgym.retrieval.connections import guarded_protocol

    http = guarded_protocol(AutoHTTPProtocol, header_timeout_s=config.header_timeout_s,
                            max_connections=config.max_connections, max_request_line_bytes=config.max_request_line_bytes,
                            max_header_bytes=config.max_header_bytes, max_header_fields=config.max_header_fields)
    # h11 (uvicorn's fallback without httptools) has a cap of its own, kept above the guard's so that the
    # guard answers first, with its 414/431.
    return uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level, access_log=False, lifespan="on",
                          http=http, timeout_keep_alive=config.keep_alive_timeout_s,  # type: ignore[arg-type]
                          h11_max_incomplete_event_size=config.max_header_bytes + 2**18)


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
