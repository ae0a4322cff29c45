"""The retrieval server under 64 concurrent loopback clients (`benchmarks.load`), in two short rounds: no
errors, over-limit requests refused with 413 while the others are served, no memory growth between rounds.

The server here is the server module over rank-bm25 (it starts in a second); the benchmark itself runs
`searchgym serve` (bm25s): `python -m benchmarks.load`.
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the retrieval server needs the server extra")

from benchmarks.load import OVERSIZED, run_load
from tools.loadgen import RANK_BM25_SERVE, synthetic_corpus

RSS_NOISE_MIB = 16.0
"""Growth between two rounds that is allocator noise, not a leak (a leak grows with every round)."""


@pytest.mark.slow
def test_64_clients_two_rounds(tmp_path):
    corpus, queries = synthetic_corpus(tmp_path, entities=300)
    result = run_load(corpus, queries, clients=64, duration_s=2.0, rounds=2, probe_every_s=0.2, launcher=RANK_BM25_SERVE)

    assert result["server_alive"]
    rounds = result["rounds"]
    for r in rounds:
        assert r["errors"] == 0, r
        assert r["requests"] >= 100, r  # the clients were really served during the probes
    probes = [p for r in rounds for p in r["probes"]]
    assert {p["kind"] for p in probes} == set(OVERSIZED)
    # A 413 for the declared over-limit body proves the refusal came before the body: the probe sends only
    # 64 KiB of the 8 MiB it declares, so a server waiting for the rest would never have answered.
    assert all(p["status"] == 413 for p in probes), [p for p in probes if p["status"] != 413]

    rss = [result["rss_before_mib"], *(r["rss_after_mib"] for r in rounds)]
    if None not in rss:  # Linux /proc
        assert result["rss_growth_last_round_mib"] < RSS_NOISE_MIB, rss


@pytest.mark.slow
def test_env_steps_ride_out_a_sigkill_of_the_retriever_process():
    """`tools.restart` at a small size: clients with default `HTTPRetriever` settings lose no step
    while `searchgym serve` replaces its SIGKILLed retriever process, and the server said 503, not 500."""
    from tools import restart

    r = restart.run(clients=8, before_s=1.0, after_s=1.0, entities=200, kills=1)
    print(r)
    assert r["failed_steps"] == 0 and r["steps"] > 0 and r["restarts"] == 1
    assert 500 not in r["probe_statuses_during_outage"]
    assert r["outage_s"][0] < 60  # numba kernels come from the disk cache; compiling would still fit


def test_slow_and_idle_clients_are_all_closed_within_the_deadlines():
    """`tools.slowclients` at a small size against short deadlines: every kind of slow socket is
    closed (408 where a request had begun), sockets past the limit get 503, none is left open."""
    from tools import slowclients
    from searchgym.corpus import Corpus
    from searchgym.retrieval import BM25Retriever
    from searchgym.retrieval.server import BackgroundServer, ServerConfig
    from tests.conftest import TEN_DOCS

    retriever = BM25Retriever(Corpus(TEN_DOCS, name="ten"), backend="rank_bm25", cache_dir=False)
    config = ServerConfig(port=0, header_timeout_s=1.0, body_timeout_s=1.5, keep_alive_timeout_s=0.5,
                          max_connections=40, warmup=False)
    with BackgroundServer(retriever, config) as server:
        r = slowclients.watch(server.port, sockets=50, watch_s=15.0)
    print(r)
    assert r["still_open"] == 0
    assert 408 in r["partial"]["statuses"] and 408 in r["short_body"]["statuses"]
    assert 200 in r["kept_alive"]["statuses"] and sum(r[k]["statuses"].get(503, 0) for k in slowclients.KINDS) >= 9
    assert r["short_body"]["slowest_close_s"] < 10 and r["idle"]["slowest_close_s"] < 10
