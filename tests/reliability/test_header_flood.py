"""Request-header floods (`tools.header_flood`) at a small size: 16 clients sending request heads that
never end, against `searchgym serve` with and without an API key they never send. The server refuses each
head as it passes its caps (414/431), its memory stays within the benchmark's 50 MiB bound, and a
well-behaved client is answered meanwhile."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the retrieval server needs the server extra")

from tools import header_flood  # noqa: E402
from tools.loadgen.server import synthetic_corpus  # noqa: E402
from tools.loadgen.server import ServerProcess  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("with_key", [False, True], ids=["no key", "api key"])
def test_16_clients_flooding_request_heads_leave_memory_flat(tmp_path, monkeypatch, with_key):
    # bm25s interpreted: on this small corpus the warm-up search is instant instead of seconds of compiling.
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    corpus, _ = synthetic_corpus(tmp_path, entities=200)
    key = header_flood.API_KEY if with_key else None
    args = ["--corpus", str(corpus), "--cache-dir", str(tmp_path / "cache"), *(["--api-key", key] if key else [])]
    with (header_flood.KeyedServerProcess if key else ServerProcess)(args) as server:
        r = header_flood.flood(server, clients=16, duration_s=3.0, key=key)
    print(r)
    assert r["server_alive"]
    assert r["connections"] >= 16 and r["sent_mib"] > 1.0  # the clients really flooded
    # Flooding connections end in refusals of their heads (a refusal that a reset overtook on a busy machine
    # shows as a close without an answer); never in a server error.
    refusals = r["statuses"].get("414", 0) + r["statuses"].get("431", 0)
    assert refusals >= 16 and not [s for s in r["statuses"] if s.startswith("5")], r["statuses"]
    assert r["well_behaved_client"].get("200", 0) >= 1, r["well_behaved_client"]
    if r["rss_before_mib"]:  # Linux /proc
        assert r["growth_mib"] < header_flood.GROWTH_BOUND_MIB, r
