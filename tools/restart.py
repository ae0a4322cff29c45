"""Env steps through a retriever restart: `searchgym serve` under load, its retriever process SIGKILLed.

    python -m tools.restart [--clients 64] [--before 5] [--after 15] [--entities 2000] [--kills 1]

`--clients` threads each run `SearchQAEnv` episodes whose retriever is an `HTTPRetriever` with default
settings (30 s budget), stepping search actions back to back. After `--before` seconds the server's
retriever process (its child, found through `/proc`) is SIGKILLed; the clients go on for `--after`
seconds more. Reported: env steps done and failed (target: 0 failed), the outage (from the kill until
`/health` answers 200 again, polled every 50 ms), the slowest step, and the HTTP statuses a raw probe saw
meanwhile (503 with Retry-After expected, never 500).

The server is started once before the run so that the numba kernels are compiled and cached; the run
then measures a restart that loads them from the cache, as every restart after a machine's first does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tools.loadgen import ServerProcess, http_get, synthetic_corpus


@dataclass
class Tally:
    steps: int = 0
    failed: int = 0
    errors: Counter = field(default_factory=Counter)
    slowest_step_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, error: str | None) -> None:
        with self.lock:
            self.steps += 1
            self.slowest_step_s = max(self.slowest_step_s, seconds)
            if error:
                self.failed += 1
                self.errors[error] += 1


def _client(url: str, records, stop: threading.Event, tally: Tally, seed: int) -> None:
    from searchgym.envs import SearchQAEnv
    from searchgym.retrieval import HTTPRetriever

    retriever = HTTPRetriever(url)
    env = SearchQAEnv(records, retriever=retriever, top_k=3, candidates=3, max_turns=1000, match_entities=False)
    env.reset(seed=seed)
    i = 0
    while not stop.is_set():
        question = records[(seed + i) % len(records)].question
        started = time.monotonic()
        error = None
        try:
            _, _, terminated, truncated, _ = env.step(f"<search>{question}</search>")
            if terminated or truncated:
                env.reset()
        except Exception as e:  # noqa: BLE001 - a failed step is what this counts
            error = type(e).__name__
            env.reset()
        tally.add(time.monotonic() - started, error)
        i += 1
    retriever.close()


def _child_pid(server: ServerProcess) -> int:
    children = []
    for pid in server._tree():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        # The retriever process is multiprocessing's spawn child; its resource tracker is a child too.
        if pid != server.proc.pid and b"spawn_main" in cmdline:
            children.append(pid)
    if len(children) != 1:
        raise RuntimeError(f"expected one retriever process under the server, found {children}")
    return children[0]


def _probe_statuses(port: int, stop: threading.Event, seen: Counter, retry_after: list[str]) -> None:
    body = b'{"queries": ["probe"], "topk": 1}'

    async def one() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin1").lower()
        seen[int(head.split()[1])] += 1
        for line in head.split("\r\n"):
            if line.startswith("retry-after:"):
                retry_after.append(line.split(":", 1)[1].strip())

    while not stop.is_set():
        try:
            asyncio.run(one())
        except (OSError, asyncio.TimeoutError, IndexError, ValueError):
            seen["no answer"] += 1
        time.sleep(0.05)


def run(clients: int, before_s: float, after_s: float, entities: int, kills: int) -> dict:
    from searchgym.data.synthetic import make_synthetic

    with tempfile.TemporaryDirectory(prefix="searchgym-restart-") as tmp:
        path, _ = synthetic_corpus(Path(tmp), entities)
        _, records = make_synthetic(num_entities=entities, seed=0, num_questions=200)
        args = ["--corpus", str(path), "--cache-dir", str(Path(tmp) / "cache")]
        with ServerProcess(args):
            pass  # the first start builds the BM25 index and compiles (and caches) the numba kernels
        with ServerProcess(args) as server:
            tally, stop, probe_stop = Tally(), threading.Event(), threading.Event()
            statuses: Counter = Counter()
            retry_after: list[str] = []
            threads = [threading.Thread(target=_client, args=(server.url, records, stop, tally, i), daemon=True)
                       for i in range(clients)]
            for t in threads:
                t.start()
            time.sleep(before_s)
            outages = []
            for _ in range(kills):
                steps_before = tally.steps
                prober = threading.Thread(target=_probe_statuses, args=(server.port, probe_stop, statuses, retry_after),
                                          daemon=True)
                os.kill(_child_pid(server), signal.SIGKILL)
                killed = time.monotonic()
                prober.start()
                time.sleep(0.2)  # let the server notice
                while asyncio.run(http_get(server.port, "/health"))[0] != 200:
                    if time.monotonic() - killed > 300:
                        raise RuntimeError("the retriever process did not come back within 300 s")
                    time.sleep(0.05)
                outages.append(round(time.monotonic() - killed, 2))
                probe_stop.set()
                prober.join()
                probe_stop.clear()
                time.sleep(after_s)
                if tally.steps == steps_before:
                    raise RuntimeError("no env step completed after the restart")
            stop.set()
            for t in threads:
                t.join(60)
            restarts = server.health()["stats"]["restarts"]
    return {
        "clients": clients, "kills": kills, "steps": tally.steps, "failed_steps": tally.failed,
        "errors": dict(tally.errors), "outage_s": outages, "slowest_step_s": round(tally.slowest_step_s, 2),
        "probe_statuses_during_outage": dict(statuses), "retry_after_values": sorted(set(retry_after)),
        "restarts": restarts,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--before", type=float, default=5.0, help="seconds of load before the kill")
    p.add_argument("--after", type=float, default=15.0, help="seconds of load after the retriever is back")
    p.add_argument("--entities", type=int, default=2000)
    p.add_argument("--kills", type=int, default=1)
    a = p.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs", flush=True)
    r = run(a.clients, a.before, a.after, a.entities, a.kills)
    print(f"{r['clients']} clients, {r['kills']} kill(s) of the retriever process: {r['steps']} env steps, "
          f"{r['failed_steps']} failed {r['errors'] or ''}; outage {r['outage_s']} s (kill to /health 200); "
          f"slowest step {r['slowest_step_s']} s; probe statuses during the outage {r['probe_statuses_during_outage']}, "
          f"Retry-After {r['retry_after_values']}; restarts counted by the server {r['restarts']}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
