"""The retrieval server's retriever in a process of its own (`ServerConfig.retriever_process`).

In one process, the event loop (HTTP, JSON) and the retriever share one GIL: every search waits for the
loop to let go of it and slows the loop down in turn. Here the retriever lives in a child process that
the server spawns; the two talk over a Unix socket pair. The child builds the retriever itself (from a
picklable factory, such as `searchgym serve`'s command-line spec), reads every request that has queued
up, searches them in one call per `k`, encodes each request's Search-R1 answer, and sends the batch's
answers back in one message. The server's process only parses requests and writes answers.

A message is two 4-byte big-endian lengths, a JSON header and a blob of bytes (JSON, never pickle: the
socket carries data, not code). To the child: `[job id, queries, k, return_scores]`. From the child: first
`["ready", describe(), number of documents]` or `["failed", message]`, then per batch `[busy seconds,
queries, [[job id, HTTP status, body length], ...]]` with the bodies, one after another, as the blob.

When the child dies, a new one is started at once (and again, with growing pauses, if that fails). Every
request in flight, and every request until the new child is ready, fails with `RetrieverRestarting`: the
server answers 503 with a `Retry-After` of about one start's duration, `/health` answers 503 with
`"status": "restarting"`, and `HTTPRetriever` waits and retries within its time budget, so a client sees
a slower answer, not a failed one. Searching is read-only, so answering a request twice is harmless.
A restart costs a process start, the retriever's build (a cached index loads in seconds) and the warm-up
search; BM25's numba kernels are cached on disk (`searchgym.retrieval.bm25`), not compiled again.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from searchgym.errors import RetrievalError, RetrieverRestarting
from searchgym.retrieval.batching import decode_json, encode_json, num_docs, render_results, search_groups, take_batch, warm_up

logger = logging.getLogger(__name__)

RESTART_PAUSE_S = 0.5
"""Pause before restarting a retriever process that died; doubled after each failed restart."""
RESTART_PAUSE_MAX_S = 60.0

_LENGTHS = struct.Struct(">II")
_READ = 1 << 20


def _frame(header: Any, blob: bytes = b"") -> bytes:
    data = encode_json(header)  # the server's JSON: compact, lone surrogates escaped (and read back by decode_json)
    return _LENGTHS.pack(len(data), len(blob)) + data + blob


def _split(buf: bytearray) -> list[tuple[Any, bytes]]:
    """The complete messages (header, blob) at the start of `buf`, removed from it."""
    out, pos = [], 0
    while len(buf) - pos >= 8:
        n, m = _LENGTHS.unpack_from(buf, pos)
        if len(buf) - pos - 8 < n + m:
            break
        start = pos + 8
        out.append((decode_json(bytes(buf[start : start + n])), bytes(buf[start + n : start + n + m])))
        pos = start + n + m
    del buf[:pos]
    return out


# -- the child ----------------------------------------------------------------------------------------


class ChildSettings(NamedTuple):
    """The `ServerConfig` fields the retriever process reads. Sent instead of the config itself, so that
    the child never imports `searchgym.retrieval.server` (and FastAPI with it) to unpickle one."""

    warmup: bool
    batch_wait_ms: float
    max_batch_queries: int


def given(retriever: Any) -> Any:
    """A factory of an existing retriever (pickled into the retriever process with it)."""
    return retriever


def _child_main(sock: socket.socket, factory: Callable[[], Any], config: ChildSettings) -> None:
    """The retriever process: build, warm up, then answer batches until the server closes the socket."""
    # Ctrl-C in a terminal reaches the whole process group: the server shuts down in order, and this
    # process ends when the server closes the socket (or dies), not with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        retriever = factory()
        if config.warmup:
            warm_up(retriever)
        sock.sendall(_frame(["ready", retriever.describe(), num_docs(retriever)]))
    except BaseException as e:  # noqa: BLE001 - reported to the server, which refuses to start
        sock.sendall(_frame(["failed", f"{type(e).__name__}: {e}"]))
        raise
    buf = bytearray()
    while True:
        sock.setblocking(True)
        data = sock.recv(_READ)
        if not data:
            return  # the server closed its end
        buf += data
        if config.batch_wait_ms:  # after an idle spell, wait a little for more requests to join the batch
            time.sleep(config.batch_wait_ms / 1000)
        sock.setblocking(False)
        try:  # everything else that queued up while the last batch was searched joins this one
            while data := sock.recv(_READ):
                buf += data
        except BlockingIOError:
            pass
        jobs = deque(header for header, _ in _split(buf))
        while jobs:
            batch = take_batch(jobs, config.max_batch_queries, lambda job: len(job[1]))
            started = time.perf_counter()
            answers = _answer(retriever, batch)
            sock.setblocking(True)
            index = [[job_id, status, len(body)] for job_id, status, body in answers]
            queries = sum(len(job[1]) for job in batch)
            sock.sendall(_frame([time.perf_counter() - started, queries, index], b"".join(body for _, _, body in answers)))


def _answer(retriever, batch: list) -> list[tuple[int, int, bytes]]:
    """Each job's (id, status, encoded body). A retriever failure fails the batch's requests (HTTP 500),
    not the process, as in the server's own retriever thread."""
    try:
        hits = search_groups(retriever, [(queries, k) for _, queries, k, _ in batch])
    except Exception as e:
        logger.exception("retriever failed on a batch of %d requests", len(batch))
        body = encode_json({"detail": f"retrieval failed: {type(e).__name__}: {e}"})
        return [(job[0], 500, body) for job in batch]
    return [(job_id, 200, encode_json(render_results(rows, return_scores))) for (job_id, _, _, return_scores), rows in zip(batch, hits)]


# -- the server's side --------------------------------------------------------------------------------


class RetrieverProcess(asyncio.Protocol):
    """The server's handle on the retriever process: `submit` sends a request, and its answer comes back
    as (HTTP status, encoded body)."""

    def __init__(self, factory: Callable[[], Any], config: Any, stats: Any):
        self.factory, self.config, self.stats = factory, config, stats
        self.description: dict | None = None
        self.num_docs: int | None = None
        self.error: str | None = None
        """Why the retriever process is gone, once it is."""
        self._futures: dict[int, asyncio.Future] = {}
        self._next_id = 0
        self._buf = bytearray()
        self._out: list[bytes] = []
        self._transport: asyncio.Transport | None = None
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._stopping = False
        self._restarting: asyncio.Task | None = None
        self.start_s = 1.0
        """How long the last successful start took: what a client is told to wait (`Retry-After`)."""

    async def start(self) -> None:
        """Spawn the child and wait until its retriever is built and warm (or raise RetrievalError). A
        child that fails or dies while starting is noticed at once; one that is not ready after
        `config.retriever_start_timeout_s` is killed."""
        self._buf.clear()  # whatever a dead predecessor left half-sent
        started = time.monotonic()
        ours, theirs = socket.socketpair()
        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold threads
        settings = ChildSettings(self.config.warmup, self.config.batch_wait_ms, self.config.max_batch_queries)
        self._proc = ctx.Process(target=_child_main, args=(theirs, self.factory, settings), name="searchgym-retriever", daemon=True)
        self._proc.start()
        theirs.close()
        loop = asyncio.get_running_loop()
        timeout = self.config.retriever_start_timeout_s
        try:
            hello = await asyncio.wait_for(loop.run_in_executor(None, _read_one, ours), timeout)
        except asyncio.TimeoutError:
            self._kill()  # its end of the socket closes, which ends the blocked read too
            ours.close()
            raise RetrievalError(f"the retriever process was not ready after {timeout:g} s "
                                 "(ServerConfig.retriever_start_timeout_s, --retriever-start-timeout-s); it was stopped") from None
        except (OSError, EOFError) as e:
            self._kill()
            ours.close()
            raise RetrievalError(f"the retriever process exited while starting ({e})") from None
        if hello[0] != "ready":
            self._kill()
            ours.close()
            raise RetrievalError(f"the retriever process failed to start: {hello[1]}")
        _, self.description, self.num_docs = hello
        ours.setblocking(False)
        await loop.create_unix_connection(lambda: self, sock=ours)
        self.start_s = time.monotonic() - started

    @property
    def pid(self) -> int | None:
        """The retriever process's id (None before `start`)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def restarting(self) -> bool:
        """True while a dead retriever process is being replaced."""
        return self._transport is None and not self._stopping and self._restarting is not None and not self._restarting.done()

    def _gone(self) -> RetrievalError:
        message = self.error or "the retriever process is not running"
        return RetrieverRestarting(message, retry_after_s=self.start_s) if self.restarting else RetrievalError(message)

    async def submit(self, queries: list[str], k: int, return_scores: bool) -> tuple[int, bytes]:
        if self._transport is None:
            raise self._gone()
        job_id = self._next_id
        self._next_id += 1
        future = asyncio.get_running_loop().create_future()
        self._futures[job_id] = future
        # The requests that arrive in one turn of the event loop go to the child in one write: one system
        # call, and one wake-up of the child, for all of them.
        self._out.append(_frame([job_id, queries, k, return_scores]))
        if len(self._out) == 1:
            asyncio.get_running_loop().call_soon(self._flush)
        self.stats.requests += 1
        self.stats.queries += len(queries)
        try:
            return await future
        finally:
            self._futures.pop(job_id, None)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None:
            self._transport.write(b"".join(out))

    # asyncio.Protocol

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        for (busy_s, queries, index), blob in _split(self._buf):
            self.stats.retriever_calls += 1
            self.stats.busy_s += busy_s
            self.stats.largest_batch = max(self.stats.largest_batch, queries)
            pos = 0
            for job_id, status, length in index:
                body = blob[pos : pos + length]
                pos += length
                if status != 200:
                    self.stats.errors += 1
                future = self._futures.get(job_id)
                if future is not None and not future.done():
                    future.set_result((status, body))

    def connection_lost(self, exc) -> None:
        self._transport = None
        if not self._stopping:
            code = None
            if self._proc is not None:
                self._proc.join(1.0)  # its socket closed because it exited: reaped in milliseconds
                code = self._proc.exitcode
            self.error = f"the retriever process exited (exit code {'unknown' if code is None else code}); restarting it"
            logger.error("%s; /retrieve answers 503 with Retry-After until it is back", self.error)
            self._restarting = asyncio.get_running_loop().create_task(self._restart(self.error))
        for future in self._futures.values():
            if not future.done():
                future.set_exception(self._gone())

    async def _restart(self, why: str) -> None:
        """Start a new retriever process, again and again with growing pauses until one starts."""
        pause = RESTART_PAUSE_S
        while not self._stopping:
            await asyncio.sleep(pause)
            try:
                await self.start()
            except RetrievalError as e:
                self.error = f"{why}; the last restart failed: {e}"
                logger.error("%s; trying again in %.0f s", self.error, min(2 * pause, RESTART_PAUSE_MAX_S))
                pause = min(2 * pause, RESTART_PAUSE_MAX_S)
                continue
            self.stats.restarts += 1
            self.error = None
            logger.warning("the retriever process is running again (restart %d)", self.stats.restarts)
            return

    async def stop(self) -> None:
        self._stopping = True
        self.error = self.error or "server shutting down"
        if self._restarting is not None:
            self._restarting.cancel()
        if self._transport is not None:
            self._transport.close()
        if self._proc is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._proc.join, 5)
            self._kill()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)


def _read_one(sock: socket.socket) -> Any:
    """One message, read blocking (the child's greeting)."""
    buf = bytearray()
    while True:
        messages = _split(buf)
        if messages:
            return messages[0][0]
        data = sock.recv(_READ)
        if not data:
            raise EOFError("the retriever process closed its connection")
        buf += data
