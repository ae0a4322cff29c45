"""Request-header floods against `searchgym serve`: does the server's memory stay flat?

    python -m tools.header_flood [--clients 16] [--duration 12] [--api-key] [--entities 500] [-- server flags]

Starts `searchgym serve` (BM25 over the synthetic world's passages), waits a second, then runs
`--clients` loopback clients for `--duration` seconds, each sending as fast as the server reads a request
whose head never ends, in one of three ways (in turn over the clients):

- `many_headers`: a request line, then header lines of about 1 KiB, forever;
- `long_header`: a request line, then one header whose value never ends;
- `long_target`: a request line whose target never ends.

A client whose connection the server closes (after an answer or not) opens another at once. With
`--api-key` the server is started with a key that the clients never send: an unauthenticated client
must be no costlier than any other. Reported: the server's resident memory (its process and the
retriever process) before the flood, at its peak and after; the growth (peak minus before, bound: 50 MiB
with 16 clients); the bytes the clients got into the server; the statuses it answered; and the answers a
well-behaved client (one request every half second, with the key when there is one) got meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from tools.loadgen.server import ServerProcess, synthetic_corpus
from tools.loadgen.server import http_get as _get

KINDS = ("many_headers", "long_header", "long_target")
API_KEY = "header-flood-benchmark-key-0123456789"
GROWTH_BOUND_MIB = 50.0


def _opening(kind: str) -> bytes:
    if kind == "long_target":
        return b"GET /health?x="
    head = b"POST /retrieve HTTP/1.1\r\nhost: x\r\n"
    return head + (b"x-long: " if kind == "long_header" else b"")


def _filler(kind: str, n: int) -> bytes:
    if kind == "many_headers":
        return b"".join(b"x-h%d: %s\r\n" % (n + i, b"v" * 1000) for i in range(64))
    return b"a" * 65536


def _statuses(data: bytes) -> list[int]:
    return [int(part[:3]) for part in data.split(b"HTTP/1.1 ")[1:] if part[:3].isdigit()]


class KeyedServerProcess(ServerProcess):
    """`ServerProcess` for a server started with an API key: a 401 from `/health` means it is up."""

    def _wait(self, timeout_s: float) -> None:
        import asyncio

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                if asyncio.run(_get(self.port, "/health"))[0] == 401:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.close()
        raise RuntimeError(f"server did not answer /health within {timeout_s:g} s")


class Flooder(threading.Thread):
    """One client: floods request heads on a fresh connection each time the server closes one."""

    def __init__(self, port: int, kind: str, until: float):
        super().__init__(daemon=True)
        self.port, self.kind, self.until = port, kind, until
        self.sent = 0
        self.connections = 0
        self.statuses: Counter = Counter()

    def run(self) -> None:
        while time.monotonic() < self.until:
            try:
                self._one_connection()
            except OSError:
                time.sleep(0.05)  # refused or reset while connecting: try again

    def _one_connection(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.connections += 1
        received, n, closed = b"", 0, False
        try:
            sock.sendall(_opening(self.kind))
            while not closed and time.monotonic() < self.until:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    chunk = sock.recv(65536)
                    closed = not chunk
                    received += chunk
                    continue
                try:
                    sock.sendall(_filler(self.kind, n))
                except socket.timeout:
                    self.statuses["the server stopped reading for 5 s"] += 1
                    return
                except OSError:
                    closed = True
                n += 64
                self.sent += len(_filler(self.kind, 0))
        finally:
            try:
                sock.settimeout(0.5)
                while chunk := sock.recv(65536):
                    received += chunk
            except OSError:
                pass
            sock.close()
        codes = _statuses(received)
        if codes or closed:
            self.statuses[codes[0] if codes else "closed without an answer"] += 1
        else:
            self.statuses["still open when the flood ended"] += 1


def _well_behaved(port: int, key: str | None) -> int | str:
    body = json.dumps({"queries": ["river"], "topk": 1}).encode()
    auth = f"authorization: Bearer {key}\r\n".encode() if key else b""
    head = (b"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nconnection: close\r\n" + auth
            + b"content-length: %d\r\n\r\n" % len(body))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(head + body)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        codes = _statuses(data)
        return codes[0] if codes else "no answer"
    except OSError as e:
        return type(e).__name__


def flood(server: ServerProcess, clients: int, duration_s: float, key: str | None) -> dict:
    """Flood `server` and watch its memory; the figures of the module docstring."""
    time.sleep(1.0)
    before = server.rss_bytes() or 0
    until = time.monotonic() + duration_s
    threads = [Flooder(server.port, KINDS[i % len(KINDS)], until) for i in range(clients)]
    for t in threads:
        t.start()
    peak, good = before, Counter()
    while time.monotonic() < until:
        peak = max(peak, server.rss_bytes() or 0)
        good[_well_behaved(server.port, key)] += 1
        time.sleep(0.5)
    for t in threads:
        t.join(10)
    after = server.rss_bytes() or 0
    mib = 2**20
    statuses: Counter = Counter()
    for t in threads:
        statuses.update({str(k): v for k, v in t.statuses.items()})
    return {
        "clients": clients, "duration_s": duration_s, "api_key": key is not None,
        "rss_before_mib": round(before / mib, 1), "rss_peak_mib": round(peak / mib, 1), "rss_after_mib": round(after / mib, 1),
        "growth_mib": round((peak - before) / mib, 1), "sent_mib": round(sum(t.sent for t in threads) / mib, 1),
        "connections": sum(t.connections for t in threads), "statuses": dict(statuses),
        "well_behaved_client": {str(k): v for k, v in good.items()}, "server_alive": server.proc.poll() is None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--duration", type=float, default=12.0)
    p.add_argument("--api-key", action="store_true", help="start the server with an API key the flooding clients never send")
    p.add_argument("--entities", type=int, default=500)
    p.add_argument("server_args", nargs="*", help="extra `searchgym serve` flags, after --")
    a = p.parse_args(argv)
    key = API_KEY if a.api_key else None
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="searchgym-flood-") as tmp:
        path, _ = synthetic_corpus(Path(tmp), a.entities)
        args = ["--corpus", str(path), "--cache-dir", str(Path(tmp) / "cache"), *(["--api-key", key] if key else []), *a.server_args]
        with (KeyedServerProcess if key else ServerProcess)(args) as server:
            r = flood(server, a.clients, a.duration, key)
    print(f"{r['clients']} clients flooding request heads for {r['duration_s']:g} s{' (server with an API key)' if key else ''}: "
          f"{r['sent_mib']} MiB sent over {r['connections']} connections; answers {r['statuses']}")
    print(f"server RSS before {r['rss_before_mib']} MiB, peak {r['rss_peak_mib']} MiB, after {r['rss_after_mib']} MiB: "
          f"growth {r['growth_mib']} MiB ({r['growth_mib'] / GROWTH_BOUND_MIB:.2f} of the {GROWTH_BOUND_MIB:g} MiB bound); "
          f"well-behaved client: {r['well_behaved_client']}; server alive: {r['server_alive']}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if r["growth_mib"] < GROWTH_BOUND_MIB and r["server_alive"] else 1


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
