"""The retrieval server under load: 64 concurrent keep-alive clients for a bounded time, in rounds.

    python -m benchmarks.load [--clients 64] [--duration 10] [--rounds 2] [--entities 2000]

The server is `searchgym serve` (BM25, bm25s) in its own process, over the synthetic world's corpus; the
queries are the world's questions. Each round prints throughput (requests/s, one query per request),
p50/p99 latency, the error count (target: zero) and the server's resident memory after the round; the
memory before the first round is taken after start-up and a one-second warm-up. Comparing the rounds
tells growth from noise: a leak grows with every round, allocator noise does not.

The peer: once the server has stopped, the retriever it served (`searchgym serve`'s BM25 over the same
corpus and cache) is called in this process one query at a time, as the env calls it, for one round's
duration. The closing line is the ratio of the server's requests/s in its last round to those in-process
queries/s: what HTTP, 64 concurrent clients and the probes leave of the bare retriever's throughput (the
server batches requests that arrive during a search, so it can exceed 1; the clients share the cores).

While the clients run, a prober sends over-limit requests on fresh connections every `--probe-every`
seconds, in turn: a body over the server's `max_body_bytes` (declared, and sent chunked without a length),
more queries than `max_queries`, and a `topk` over `max_topk`. Each must be refused with 413 quickly
(the server reads no more than its limit) while the clients see no errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from searchgym.retrieval.server import ServerConfig
from tools.loadgen import (
    SERVE,
    ServerProcess,
    Timing,
    load_test,
    read_response,
    run_clients,
    synthetic_corpus,
    time_in_process,
)

LIMITS = ServerConfig()
"""The limits of a server started with default flags (what the probes exceed)."""

OVERSIZED = ("body_declared", "body_chunked", "queries", "topk")


@dataclass
class Probe:
    kind: str
    status: int | None
    ms: float
    error: str | None = None


@dataclass
class Round:
    requests: int
    seconds: float
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    rss_after_mib: float | None
    probes: list[Probe] = field(default_factory=list)

    @property
    def refused_413(self) -> int:
        return sum(p.status == 413 for p in self.probes)

    @property
    def slowest_probe_ms(self) -> dict[str, float]:
        """The slowest refusal of each kind of over-limit request, in ms."""
        out: dict[str, float] = {}
        for p in self.probes:
            out[p.kind] = round(max(out.get(p.kind, 0.0), p.ms), 1)
        return out


async def probe(port: int, kind: str, timeout_s: float = 10.0) -> Probe:
    """One over-limit request on a fresh connection; the status and the time to it."""
    start = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout_s)
        head = b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        if kind == "body_declared":
            # The length alone is over the limit: the server refuses before reading any of the body.
            writer.write(head + b"Content-Length: %d\r\n\r\n" % (LIMITS.max_body_bytes + 1) + b"x" * 65536)
        elif kind == "body_chunked":
            # No length: the server counts what it reads and stops at the limit.
            chunk = b"x" * 2**20
            writer.write(head + b"Transfer-Encoding: chunked\r\n\r\n")
            for _ in range(LIMITS.max_body_bytes // len(chunk) + 2):
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            writer.write(b"0\r\n\r\n")
        else:
            n, k = (LIMITS.max_queries + 1, 3) if kind == "queries" else (1, LIMITS.max_topk + 1)
            body = json.dumps({"queries": ["capital city"] * n, "topk": k, "return_scores": True}).encode()
            writer.write(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        status, _ = await asyncio.wait_for(read_response(reader), timeout_s)
        return Probe(kind, status, (time.perf_counter() - start) * 1000)
    except (OSError, ValueError, IndexError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
        return Probe(kind, None, (time.perf_counter() - start) * 1000, f"{type(e).__name__}: {e}")
    finally:
        if writer is not None:
            writer.close()


async def _round(port: int, queries: Sequence[str], k: int, clients: int, duration_s: float, probe_every_s: float):
    probes: list[Probe] = []

    async def prober() -> None:
        i = 0
        while time.perf_counter() < stop_at:
            await asyncio.sleep(probe_every_s)
            probes.append(await probe(port, OVERSIZED[i % len(OVERSIZED)]))
            i += 1

    stop_at = time.perf_counter() + duration_s
    timing, _ = await asyncio.gather(
        run_clients(port, queries, k, clients, duration_s, max_requests=10**9), prober() if probe_every_s > 0 else asyncio.sleep(0)
    )
    return timing, probes


def run_load(
    corpus_path: Path,
    queries: Sequence[str],
    *,
    clients: int = 64,
    duration_s: float = 10.0,
    rounds: int = 2,
    k: int = 3,
    probe_every_s: float = 0.5,
    launcher: Sequence[str] = SERVE,
    server_args: Sequence[str] = (),
) -> dict:
    """Start the server, warm it up, run `rounds` rounds of load; the figures as a dict."""
    with ServerProcess(["--corpus", str(corpus_path), *server_args], launcher=launcher) as server:
        load_test(server.port, queries[:32], k, clients=min(clients, 8), duration_s=1.0, max_requests=500)
        rss_before = server.rss_bytes()
        results = []
        for _ in range(rounds):
            timing, probes = asyncio.run(_round(server.port, queries, k, clients, duration_s, probe_every_s))
            results.append(_summary(timing, probes, server.rss_bytes()))
        alive = server.proc.poll() is None
    rss = [r.rss_after_mib for r in results]
    return {
        "clients": clients,
        "duration_s": duration_s,
        "rss_before_mib": _mib(rss_before),
        "rounds": [{**asdict(r), "refused_413": r.refused_413, "slowest_probe_ms": r.slowest_probe_ms} for r in results],
        "rss_growth_last_round_mib": rss[-1] - rss[-2] if len(rss) > 1 and None not in rss[-2:] else None,
        "server_alive": alive,
    }


def _summary(timing: Timing, probes: list[Probe], rss: int | None) -> Round:
    return Round(timing.queries, round(timing.seconds, 2), round(timing.qps, 1), round(timing.pct(50), 2),
                 round(timing.pct(99), 2), timing.errors, _mib(rss), probes)


def _mib(n: int | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)


def in_process_peer(corpus_path: Path, queries: Sequence[str], k: int, duration_s: float, cache_dir: Path) -> Timing:
    """The retriever `searchgym serve --corpus corpus_path` serves, built the same way (same cache), timed
    in this process one query per call for `duration_s`."""
    from searchgym.cli.serve import build_retriever

    retriever = build_retriever(None, str(corpus_path), None, str(cache_dir))
    retriever.search(list(queries[:3]), k)  # numba compiles on the first search: not part of the timing
    return time_in_process(lambda batch: retriever.search(batch, k), queries, duration_s=duration_s, max_queries=10**9)


def print_report(result: dict, passages: int | None = None) -> None:
    where = f" over {passages} passages" if passages else ""
    print(f"{result['clients']} clients, {result['duration_s']:g} s rounds{where}; server RSS before: {result['rss_before_mib']} MiB")
    for i, r in enumerate(result["rounds"], 1):
        slowest = ", ".join(f"{kind} {ms:.0f} ms" for kind, ms in sorted(r["slowest_probe_ms"].items()))
        print(
            f"round {i}: {r['requests']} requests in {r['seconds']} s = {r['requests_per_s']} req/s, "
            f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, errors {r['errors']}, RSS after {r['rss_after_mib']} MiB; "
            f"over-limit requests refused with 413: {r['refused_413']}/{len(r['probes'])} (slowest: {slowest})"
        )
    print(f"RSS growth over the last round: {result['rss_growth_last_round_mib']} MiB; server alive: {result['server_alive']}")
    if "in_process_qps" in result:
        print(f"throughput ratio server (last round) / in-process retriever: {result['server_over_in_process']:.2f}x "
              f"({result['rounds'][-1]['requests_per_s']} req/s vs {result['in_process_qps']} queries/s, one query per call)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--entities", type=int, default=2000, help="synthetic world size (about 4 passages per entity)")
    parser.add_argument("--k", type=int, default=3, help="documents per query")
    parser.add_argument("--probe-every", type=float, default=0.5, help="seconds between over-limit requests (0: none)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="searchgym-load-") as tmp:
        path, queries = synthetic_corpus(Path(tmp), args.entities)
        passages = len(path.read_text(encoding="utf-8").splitlines())
        result = run_load(path, queries, clients=args.clients, duration_s=args.duration, rounds=args.rounds, k=args.k,
                          probe_every_s=args.probe_every, server_args=("--cache-dir", str(Path(tmp) / "cache")))
        peer = in_process_peer(path, queries, args.k, args.duration, Path(tmp) / "cache")
    result["in_process_qps"] = round(peer.qps, 1)
    result["server_over_in_process"] = result["rounds"][-1]["requests_per_s"] / peer.qps if peer.qps else float("nan")
    result["passages"] = passages
    print_report(result, passages)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
