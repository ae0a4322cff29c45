"""Timing helpers for the retrieval benchmark: in-process latency, a retrieval server in a subprocess, and
a small keep-alive HTTP load generator.

The load generator speaks raw HTTP/1.1 over asyncio streams (one connection per client) so that, on a
small machine, the clients cost little CPU next to the server they measure; every response is still
parsed as JSON and checked for the Search-R1 shape. Everything is bounded: each run stops after
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
        """The server process's resident memory (Linux `/proc`; None elsewhere or once it has exited)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return None

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server process has used so far (Linux `/proc`; None elsewhere)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

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
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
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


async def run_clients(port, queries, k, clients, duration_s, max_requests, request_timeout_s=10.0) -> Timing:
    """The coroutine behind `load_test`, to run beside other tasks in one event loop."""
    bodies = [json.dumps({"queries": [q], "topk": k, "return_scores": True}).encode() for q in queries]
    lat: list[float] = []
    counter = {"next": 0, "errors": 0}
    start = time.perf_counter()

    async def client() -> None:
        reader = writer = None
        while counter["next"] < max_requests and time.perf_counter() - start < duration_s:
            i = counter["next"]
            counter["next"] += 1
            body = bodies[i % len(bodies)]
            t = time.perf_counter()
            try:
                if writer is None:
                    reader, writer = await _within(request_timeout_s, asyncio.open_connection("127.0.0.1", port))
                writer.write(
                    b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                status, raw = await _within(request_timeout_s, _read_response(reader))  # type: ignore[arg-type]
                result = _loads(raw)["result"] if status == 200 else None
                if not (
                    isinstance(result, list)
                    and len(result) == 1
                    and all("document" in h and "score" in h for h in result[0])
                ):
                    raise ValueError(f"bad answer (HTTP {status})")
                lat.append((time.perf_counter() - t) * 1000)
            except (OSError, ValueError, KeyError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                counter["errors"] += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
        if writer is not None:
            writer.close()

    cpu = time.process_time()
    await asyncio.gather(*(client() for _ in range(clients)))
    return Timing(len(lat), time.perf_counter() - start, lat, counter["errors"], cpu_s=time.process_time() - cpu)
