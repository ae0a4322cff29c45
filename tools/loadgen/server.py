"""A retrieval server in a subprocess on a loopback port (`ServerProcess`), the commands that start one,
the corpus it is started on for load (`synthetic_corpus`), and one-request HTTP helpers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


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
                status, _ = asyncio.run(http_get(self.port, "/health"))
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
        return json.loads(asyncio.run(http_get(self.port, "/health"))[1])

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


async def http_get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        return await asyncio.wait_for(read_response(reader), 5)
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    # The head in one read rather than a read per line: the load generator shares the machine with the
    # server it measures, so every microsecond it spends is taken from the server.
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as e:
        raise ValueError(f"response head over {e.consumed} bytes") from None
    status, length = parse_head(head[:-4])
    return status, await reader.readexactly(length)


def parse_head(head: bytes) -> tuple[int, int]:
    """(status, content length) of an HTTP/1.1 response head."""
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return status, int(value)
    return status, 0



def synthetic_corpus(folder: Path, entities: int, seed: int = 0) -> tuple[Path, list[str]]:
    """The synthetic world's corpus as a jsonl file, and its questions as queries."""
    from searchgym.data.synthetic import make_synthetic

    corpus, records = make_synthetic(num_entities=entities, seed=seed, num_questions=1000)
    path = folder / f"synthetic-{entities}.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": d.id, "contents": d.contents}, ensure_ascii=False) + "\n" for d in corpus)
    return path, [r.question for r in records]
