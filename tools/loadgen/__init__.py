"""Timing helpers for the retrieval benchmarks and the fault tools: in-process latency (`timing`), a
retrieval server in a subprocess (`server`), and a small keep-alive HTTP load generator (`clients`).

The load generator speaks raw HTTP/1.1 through asyncio protocols (one keep-alive connection per client)
so that, on a small machine, the clients cost little CPU next to the server they measure; every response
is still checked for the Search-R1 shape (see `run_clients`). Everything is bounded: each run stops after
`duration_s` or `max_requests`, and the subprocess is killed on exit.
"""

from tools.loadgen.clients import load_test, run_clients
from tools.loadgen.server import (
    RANK_BM25_SERVE,
    SERVE,
    ServerProcess,
    free_port,
    http_get,
    parse_head,
    read_response,
    synthetic_corpus,
)
from tools.loadgen.timing import Timing, time_in_process

__all__ = ["RANK_BM25_SERVE", "SERVE", "ServerProcess", "Timing", "free_port", "http_get", "load_test", "parse_head",
           "read_response", "run_clients", "synthetic_corpus", "time_in_process"]
