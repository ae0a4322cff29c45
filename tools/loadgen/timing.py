"""What a timed run measured (`Timing`), and in-process timing of a search function, one query per call."""

from __future__ import annotations

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
