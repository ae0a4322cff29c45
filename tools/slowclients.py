"""Slow and idle clients against `searchgym serve`: how many sockets does the server still hold later?

    python -m tools.slowclients [--sockets 1500] [--watch 60] [--entities 500] [-- server flags]

Opens `--sockets` loopback connections in equal shares of five kinds and watches them for `--watch`
seconds (every socket is polled twice a second):

- `idle`: connects and sends nothing;
- `partial`: sends half of a request's headers, then nothing;
- `dribble`: sends a request's headers one byte a second;
- `short_body`: sends complete headers and a body shorter than its `Content-Length`;
- `kept_alive`: sends one whole request, reads the answer, then stays idle on the kept-alive connection.

Reported per kind: sockets the server closed, when (median and slowest, from opening), the statuses it
answered with, and how many were still open when the watch ended (target: 0 after 60 s). Meanwhile a
well-behaved client sends one request a second on a fresh connection; its answers are counted too.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tools.loadgen import ServerProcess, synthetic_corpus

KINDS = ("idle", "partial", "dribble", "short_body", "kept_alive")
BODY = json.dumps({"queries": ["river"], "topk": 1}).encode()


def _request(length: int | None = None) -> bytes:
    return (b"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
            % (len(BODY) if length is None else length))


@dataclass
class Conn:
    kind: str
    sock: socket.socket
    opened: float
    sent: int = 0
    received: bytes = b""
    closed_at: float | None = None
    answers: list[int] = field(default_factory=list)


def _status_codes(data: bytes) -> list[int]:
    return [int(part[:3]) for part in data.split(b"HTTP/1.1 ")[1:] if part[:3].isdigit()] if data else []


def _open(kind: str, port: int) -> Conn:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn = Conn(kind, sock, time.monotonic())
    head = _request()
    if kind == "partial":
        sock.sendall(head[: len(head) // 2])
    elif kind == "short_body":
        sock.sendall(_request(len(BODY) + 100) + BODY)
    elif kind == "kept_alive":
        sock.sendall(head + BODY)
    sock.setblocking(False)
    return conn


def _well_behaved(port: int) -> int | str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(_request().replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n") + BODY)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        codes = _status_codes(data)
        return codes[0] if codes else "no answer"
    except OSError as e:
        return type(e).__name__


def watch(port: int, sockets: int, watch_s: float) -> dict:
    conns = [_open(KINDS[i % len(KINDS)], port) for i in range(sockets)]
    opened_all = time.monotonic()
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ, c)
    good: Counter = Counter()
    next_dribble = next_good = time.monotonic()
    head = _request()
    while time.monotonic() - opened_all < watch_s and any(c.closed_at is None for c in conns):
        now = time.monotonic()
        if now >= next_dribble:
            next_dribble += 1.0
            for c in conns:
                if c.kind == "dribble" and c.closed_at is None and c.sent < len(head):
                    try:
                        c.sock.send(head[c.sent : c.sent + 1])
                        c.sent += 1
                    except OSError:
                        pass  # closed by the server: the read below sees it
        if now >= next_good:
            next_good += 1.0
            good[_well_behaved(port)] += 1
        for key, _ in sel.select(timeout=0.5):
            c: Conn = key.data
            try:
                chunk = c.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if chunk:
                c.received += chunk
                continue
            c.closed_at = time.monotonic()
            sel.unregister(c.sock)
            c.sock.close()
    result = {}
    for kind in KINDS:
        mine = [c for c in conns if c.kind == kind]
        closed = [c.closed_at - c.opened for c in mine if c.closed_at is not None]
        statuses = Counter(code for c in mine for code in _status_codes(c.received))
        result[kind] = {
            "sockets": len(mine), "closed": len(closed), "still_open": len(mine) - len(closed),
            "median_close_s": round(statistics.median(closed), 1) if closed else None,
            "slowest_close_s": round(max(closed), 1) if closed else None,
            "statuses": dict(statuses),
        }
    for c in conns:
        if c.closed_at is None:
            c.sock.close()
    result["well_behaved_client"] = {str(k): v for k, v in good.items()}
    result["still_open"] = sum(v["still_open"] for k, v in result.items() if k in KINDS)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sockets", type=int, default=1500)
    p.add_argument("--watch", type=float, default=60.0)
    p.add_argument("--entities", type=int, default=500)
    p.add_argument("server_args", nargs="*", help="extra `searchgym serve` flags, after --")
    a = p.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="searchgym-slow-") as tmp:
        path, _ = synthetic_corpus(Path(tmp), a.entities)
        with ServerProcess(["--corpus", str(path), "--cache-dir", str(Path(tmp) / "cache"), *a.server_args]) as server:
            r = watch(server.port, a.sockets, a.watch)
            alive = server.proc.poll() is None
    for kind in KINDS:
        k = r[kind]
        print(f"{kind:<11} {k['sockets']:>5} sockets: closed {k['closed']}, still open {k['still_open']}; "
              f"close after median {k['median_close_s']} s, slowest {k['slowest_close_s']} s; statuses {k['statuses']}")
    print(f"still open after {a.watch:g} s: {r['still_open']} of {a.sockets}; well-behaved client (1/s): "
          f"{r['well_behaved_client']}; server alive: {alive}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
