"""Timing helpers for the retrieval benchmark: in-process latency, a retrieval server in a subprocess, and
a small keep-alive HTTP load generator.

The load generator speaks raw HTTP/1.1 through asyncio protocols (one keep-alive connection per client)
so that, on a small machine, the clients cost little CPU next to the server they measure; every response
is still checked for the Search-R1 shape (see `run_clients`). Everything is bounded: each run stops after
`duration_s` or `max_requests`, and the subprocess is killed on exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Timing:
    queries: int
    seconds: float
    latencies_ms: list[float]
    errors: int = 0
    cpu_s: float | None = None
    """CPU time this process spent in the run: the searches in-process, the clients in a load test."""
    server_cpu_s: float | None = None
    """CPU time the server process spent in the run (load tests against a `ServerProcess`)."""

    def cpu_us_per_query(self, server: bool = False) -> float:
        cpu = self.server_cpu_s if server else self.cpu_s
        return cpu / self.queries * 1e6 if cpu is not None and self.queries else float("nan")

    @property
    def qps(self) -> float:
        return self.queries / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")


def time_in_process(
    search: Callable[[list[str]], object], queries: Sequence[str], *, duration_s: float, max_queries: int
) -> Timing:
    """One query per call, as the env retrieves, until `duration_s` or `max_queries`."""
    lat, start, n = [], time.perf_counter(), 0
    cpu = time.process_time()
    while n < max_queries and time.perf_counter() - start < duration_s:
        q = queries[n % len(queries)]
        t = time.perf_counter()
        search([q])
        lat.append((time.perf_counter() - t) * 1000)
        n += 1
    return Timing(n, time.perf_counter() - start, lat, cpu_s=time.process_time() - cpu)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVE = (sys.executable, "-m", "searchgym", "serve")
"""The command that starts the retrieval server; `ServerProcess` appends the arguments and the address."""

_RANK_BM25_SCRIPT = """
import argparse
from searchgym.corpus import load_corpus
from searchgym.retrieval import BM25Retriever
from searchgym.retrieval.server import ServerConfig, serve
p = argparse.ArgumentParser()
for flag in ("--corpus", "--host", "--log-level"):
    p.add_argument(flag)
p.add_argument("--port", type=int)
a = p.parse_args()
serve(BM25Retriever(load_corpus(a.corpus), backend="rank_bm25"), ServerConfig(host=a.host, port=a.port), log_level=a.log_level)
"""
RANK_BM25_SERVE = (sys.executable, "-c", _RANK_BM25_SCRIPT)
"""The same server over rank-bm25 (`--corpus` only): it starts in about a second, where `searchgym serve`'s
bm25s spends ~10 s compiling numba kernels in its warm-up search. For tests that start servers often."""


class ServerProcess:
    """`python -m searchgym serve ...` on a loopback port (a free one unless `port` is given), stopped on
    exit. `launcher` replaces the `searchgym serve` command (it must accept `--host`, `--port` and
    `--log-level`); `kill()` sends SIGKILL, and starting a new `ServerProcess` on the same port restarts it."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        startup_timeout_s: float = 180.0,
        port: int | None = None,
        launcher: Sequence[str] = SERVE,
    ):
        self.port = port or free_port()
        cmd = [
            *launcher,
            *args,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
        # A file, not a pipe: a server logging under load must never block on a full pipe nobody reads.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._log, env=env)
        self._wait(startup_timeout_s)

    def _wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                status, _ = asyncio.run(_get(self.port, "/health"))
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.close()
        raise RuntimeError(f"server did not answer /health within {timeout_s:g} s")

    def log_tail(self, chars: int = 2000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-chars:]

    def health(self) -> dict:
        return json.loads(asyncio.run(_get(self.port, "/health"))[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/retrieve"

    def rss_bytes(self) -> int | None:
        """Resident memory of the server: its process and every process it started (the retriever
        process), from Linux `/proc`; None elsewhere or once it has exited. (Pages two of them share, such
        as a memory-mapped index, count once for each.)"""
        total = None
        for pid in self._tree():
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total = (total or 0) + int(line.split()[1]) * 1024
            except OSError:  # exited meanwhile
                pass
        return total

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server has used so far: its process and every process it started
        (the retriever process), from Linux `/proc`; None elsewhere."""
        ticks = None
        for pid in self._tree():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks = (ticks or 0) + int(fields[11]) + int(fields[12])
            except (OSError, ValueError, IndexError):
                pass
        return None if ticks is None else ticks / os.sysconf("SC_CLK_TCK")

    def _tree(self) -> list[int]:
        """The server's process id and those of its descendants (Linux `/proc`; empty elsewhere or once it
        has exited)."""
        parents = {}
        try:
            entries = os.listdir("/proc")
        except OSError:
            return []
        for entry in entries:
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):  # exited meanwhile
                    continue
        if self.proc.pid not in parents:
            return []
        tree, grew = {self.proc.pid}, True
        while grew:
            more = {pid for pid, parent in parents.items() if parent in tree and pid not in tree}
            tree |= more
            grew = bool(more)
        return sorted(tree)

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to close connections or finish requests."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


async def _get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return await asyncio.wait_for(_read_response(reader), 5)
    finally:
        writer.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    # The head in one read rather than a read per line: the load generator shares the machine with the
    # server it measures, so every microsecond it spends is taken from the server.
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as e:
        raise ValueError(f"response head over {e.consumed} bytes") from None
    status, length = _parse_head(head[:-4])
    return status, await reader.readexactly(length)


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
            status, length = _parse_head(bytes(buf[:head_end]))
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


def _parse_head(head: bytes) -> tuple[int, int]:
    """(status, content length) of an HTTP/1.1 response head."""
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return status, int(value)
    return status, 0


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
