"""A small keep-alive HTTP load generator: `clients` connections, each sending one-query Search-R1 requests
back to back through asyncio protocols, every answer checked (see `run_clients`)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

from tools.loadgen.server import parse_head
from tools.loadgen.timing import Timing

try:  # the server extra installs orjson; parsing each answer is most of the client's work
    from orjson import loads as _loads
except ImportError:
    _loads = json.loads


def load_test(
    port: int,
    queries: Sequence[str],
    k: int,
    *,
    clients: int,
    duration_s: float,
    max_requests: int,
    request_timeout_s: float = 10.0,
) -> Timing:
    """`clients` concurrent keep-alive connections, each sending one-query Search-R1 requests back to back."""
    coro = run_clients(port, queries, k, clients, duration_s, max_requests, request_timeout_s)
    loop_factory = _fast_loop()
    if loop_factory is None or not hasattr(asyncio, "Runner"):  # asyncio.Runner: Python 3.11+
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(coro)


def _fast_loop():
    """uvloop's event loop where installed (the server extra brings it): the clients share the cores with
    the server they measure, and every microsecond they spend is taken from it."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _within(seconds: float, coro):
    """`await coro`, cancelled after `seconds`. asyncio.timeout where there is one (Python 3.11+): in
    3.11 `wait_for` runs the awaited call as a task of its own, which costs the load generator more than
    parsing the answer."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(seconds):
            return await coro
    return await asyncio.wait_for(coro, seconds)


class _Run:
    """The shared state of one load test: which request comes next, when to stop, what was measured, and
    each query's answer once it has been checked."""

    def __init__(self, bodies: list[bytes], duration_s: float, max_requests: int, done: asyncio.Future):
        self.requests = [
            b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            for body in bodies
        ]
        self.answers: list[bytes | None] = [None] * len(bodies)
        """The first answer to each query that passed the full check: the server is deterministic, so a
        later answer equal to it byte for byte is the same valid answer (checked without parsing it)."""
        self.start = time.perf_counter()
        self.stop_at = self.start + duration_s
        self.max_requests = max_requests
        self.next = 0
        self.errors = 0
        self.lat: list[float] = []
        self.done = done
        self.open = 0
        """Clients still running: the run is over when the last one stops."""

    def take(self) -> int | None:
        """The index of the next request to send, or None when the run is over."""
        if self.next >= self.max_requests or time.perf_counter() >= self.stop_at:
            return None
        self.next += 1
        return self.next - 1

    def check(self, i: int, status: int, body: bytes) -> bool:
        q = i % len(self.answers)
        if status != 200:
            return False
        if body == self.answers[q]:
            return True
        try:
            result = _loads(body)["result"]
        except (ValueError, KeyError, TypeError):
            return False
        ok = isinstance(result, list) and len(result) == 1 and isinstance(result[0], list) and all(
            isinstance(h, dict) and "document" in h and "score" in h for h in result[0])
        if ok and self.answers[q] is None:
            self.answers[q] = body
        return ok

    def client_stopped(self) -> None:
        self.open -= 1
        if self.open == 0 and not self.done.done():
            self.done.set_result(None)


class _Connection(asyncio.Protocol):
    """One TCP connection of a client: reads HTTP/1.1 answers framed by Content-Length."""

    def __init__(self, client: _Client):
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.client.connected(self)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        head_end = buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        try:
            status, length = parse_head(bytes(buf[:head_end]))
        except (ValueError, IndexError):
            self.client.failed(self)
            return
        end = head_end + 4 + length
        if len(buf) < end:
            return
        body = bytes(buf[head_end + 4 : end])
        extra = len(buf) > end  # more than one answer to one request
        buf.clear()
        self.client.answered(self, status, body, extra)

    def connection_lost(self, exc) -> None:
        self.client.failed(self)


class _Client:
    """One client: a keep-alive connection sending one-query requests back to back. Callbacks, not a
    coroutine over streams: the load generator shares the cores with the server it measures, and this
    costs it a fraction of the CPU per request. Events from a connection it has dropped are ignored."""

    def __init__(self, run: _Run, port: int, timeout_s: float):
        self.run, self.port, self.timeout_s = run, port, timeout_s
        self.conn: _Connection | None = None
        self.i: int | None = None
        """The request in flight, if any."""
        self.sent_at = 0.0
        self.stopped = False

    def send_next(self) -> None:
        i = self.run.take()
        if i is None:
            self.stop()
            return
        self.i, self.sent_at = i, time.perf_counter()
        if self.conn is None:
            self.conn = _Connection(self)
            asyncio.get_running_loop().create_task(self._connect(self.conn))
        elif self.conn.transport is not None:
            self.conn.transport.write(self.run.requests[i % len(self.run.requests)])

    async def _connect(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        try:
            await _within(self.timeout_s, loop.create_connection(lambda: conn, "127.0.0.1", self.port))
        except (OSError, asyncio.TimeoutError):
            self.failed(conn)

    def connected(self, conn: _Connection) -> None:
        if conn is not self.conn or self.stopped:
            conn.transport.close()  # type: ignore[union-attr]
        elif self.i is not None:
            conn.transport.write(self.run.requests[self.i % len(self.run.requests)])  # type: ignore[union-attr]

    def answered(self, conn: _Connection, status: int, body: bytes, extra: bool) -> None:
        if conn is not self.conn:
            return
        i, self.i = self.i, None
        if i is None or extra or not self.run.check(i, status, body):
            self.i = i
            self.failed(conn)
            return
        self.run.lat.append((time.perf_counter() - self.sent_at) * 1000)
        self.send_next()

    def overdue(self, now: float) -> bool:
        return self.i is not None and now - self.sent_at > self.timeout_s

    def failed(self, conn: _Connection | None) -> None:
        """Count an error for the request in flight, drop the connection (its state is unknown) and go on
        with a new one."""
        if conn is not self.conn:
            return
        if self.i is not None:
            self.run.errors += 1
            self.i = None
        self._drop()
        if not self.stopped:
            self.send_next()

    def _drop(self, *, gracefully: bool = False) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.close() if gracefully else conn.transport.abort()

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._drop(gracefully=self.i is None)
        self.run.client_stopped()


async def run_clients(port, queries, k, clients, duration_s, max_requests, request_timeout_s=10.0) -> Timing:
    """The coroutine behind `load_test`, to run beside other tasks in one event loop.

    Each client sends its next request as soon as the previous answer is read. Every answer is checked:
    HTTP 200 and the Search-R1 shape, parsed in full the first time each query is answered, later by
    comparing bytes with that answer (parsed in full again when they differ). An error (a refused or lost
    connection, a malformed or wrong answer, no answer within `request_timeout_s`) is counted and the
    client reconnects."""
    loop = asyncio.get_running_loop()
    bodies = [json.dumps({"queries": [q], "topk": k, "return_scores": True}).encode() for q in queries]
    run = _Run(bodies, duration_s, max_requests, loop.create_future())
    pool = [_Client(run, port, request_timeout_s) for _ in range(clients)]
    run.open = len(pool)
    if not pool:
        run.done.set_result(None)
    cpu = time.process_time()
    for c in pool:
        c.send_next()

    async def watchdog() -> None:
        while not run.done.done():
            await asyncio.sleep(min(0.05, request_timeout_s / 4))
            now = time.perf_counter()
            for c in pool:
                if c.overdue(now):
                    c.failed(c.conn)

    dog = loop.create_task(watchdog())
    try:
        await run.done
    finally:
        dog.cancel()
        for c in pool:
            c.stop()
    return Timing(len(run.lat), time.perf_counter() - run.start, run.lat, run.errors, cpu_s=time.process_time() - cpu)
