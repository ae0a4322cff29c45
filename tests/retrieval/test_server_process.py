"""The retrieval server with its retriever in a process of its own (`ServerConfig.retriever_process`)."""

import functools
import os
import pickle
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
requests = pytest.importorskip("requests")

from searchgym.corpus import Corpus
from searchgym.errors import ConfigError, RetrievalError
from searchgym.retrieval import BM25Retriever, HTTPRetriever, HTTPRetrieverConfig
from searchgym.retrieval.server import BackgroundServer, ServerConfig
from tests.conftest import TEN_DOCS

PROCESS = ServerConfig(port=0, retriever_process=True)


def rank_bm25() -> BM25Retriever:
    """A factory the retriever process can call (rank-bm25: no numba kernels to compile there)."""
    return BM25Retriever(Corpus(TEN_DOCS, name="ten"), backend="rank_bm25", cache_dir=False)


class Flaky:
    """Fails its first two searches: the warm-up (the server starts anyway) and the first request."""

    def __init__(self):
        self.inner = rank_bm25()
        self.failures = 2

    def search(self, queries, k):
        if self.failures:
            self.failures -= 1
            raise RuntimeError("index on fire")
        return self.inner.search(queries, k)

    def describe(self):
        return self.inner.describe()


class Slow:
    """rank-bm25 that takes a second per search: requests are in flight long enough to be cut off."""

    def __init__(self):
        self.inner = rank_bm25()
        self.warm = False

    def search(self, queries, k):
        if self.warm:
            time.sleep(1.0)
        self.warm = True
        return self.inner.search(queries, k)

    def describe(self):
        return self.inner.describe()


def slow_rank_bm25() -> Slow:
    return Slow()


def no_corpus() -> BM25Retriever:
    raise ConfigError("no corpus at /nowhere.jsonl")


def hangs() -> BM25Retriever:
    time.sleep(600)  # an index load that never finishes
    raise AssertionError("unreachable")


REQUESTS = [
    {"queries": ["Which river flows through Rome?", "Who discovered radioactivity?"], "topk": 3, "return_scores": True},
    {"queries": ["Berlin"], "topk": 1},
    {"queries": ["zzqxj"], "topk": 5, "return_scores": True},  # matches nothing
    {"queries": [], "topk": 2},
    {"queries": ["capital city"]},  # the default topk
    {"queries": ["river"], "topk": 2, "return_scores": True},
    {"queries": ["Rome \ud800 capital"], "topk": 2},  # a lone surrogate crosses to the process and back
] * 4


def _answers(url: str) -> list[tuple[int, bytes]]:
    # Concurrently, so that requests with different topk share batches.
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda body: requests.post(url, json=body, timeout=10), REQUESTS))
    return [(r.status_code, r.content) for r in responses]


def test_the_retriever_process_answers_byte_for_byte_as_the_thread_does():
    with BackgroundServer(rank_bm25(), ServerConfig(port=0)) as threaded, BackgroundServer(rank_bm25, PROCESS) as process:
        assert _answers(process.url) == _answers(threaded.url)
        assert all(status == 200 for status, _ in _answers(process.url))
        health = requests.get(process.url.replace("/retrieve", "/health"), timeout=10).json()
        assert health["status"] == "ok" and health["documents"] == 10
        assert health["retriever"] == rank_bm25().describe()
        assert health["stats"]["requests"] == 2 * len(REQUESTS) and health["stats"]["retriever_calls"] >= 1
        # Refusals are the server process's own: they never reach the retriever.
        assert requests.post(process.url, json={"queries": "Rome"}, timeout=10).status_code == 422
        child = process.app.state.worker.pid
    # Stopping the server ends its retriever process.
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for every purpose but its exit status
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def test_the_retriever_process_loads_no_web_framework():
    # The child builds and searches; HTTP is the server's. Unpickling its settings or a factory must not
    # pull in the server module (FastAPI, Starlette, pydantic: ~15 MiB of the child's memory).
    from tests.retrieval.process_factories import reports_modules

    with BackgroundServer(reports_modules, PROCESS) as server:
        health = requests.get(server.url.replace("/retrieve", "/health"), timeout=10).json()
    assert health["status"] == "ok" and health["retriever"]["web_packages_loaded"] == []
    assert {"fastapi", "starlette"} <= set(__import__("sys").modules)  # this process, the server's, has them


def test_a_retriever_object_is_copied_into_the_process_and_its_failures_give_500():
    with BackgroundServer(Flaky(), PROCESS) as server:
        with pytest.raises(RetrievalError, match="500.*index on fire"):
            HTTPRetriever(HTTPRetrieverConfig(url=server.url, retries=0)).search(["Rome"], 1)
        assert HTTPRetriever(server.url).search(["Rome"], 1)[0][0].doc.id == "d1"


def test_a_dead_retriever_process_answers_503_retry_after_and_clients_ride_out_the_restart():
    with BackgroundServer(rank_bm25, PROCESS) as server:
        worker = server.app.state.worker
        health_url = server.url.replace("/retrieve", "/health")
        impatient = HTTPRetriever(HTTPRetrieverConfig(url=server.url, timeout_s=0.5, retries=0))
        assert impatient.search(["Rome"], 1)[0][0].doc.id == "d1"
        first = worker.pid
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while not worker.restarting and time.monotonic() < deadline:
            time.sleep(0.01)
        # Until the new process is ready (it starts after a pause and takes a second or more to import and
        # build): /retrieve and /health answer 503 with Retry-After, saying why.
        raw = requests.post(server.url, json={"queries": ["Rome"], "topk": 1}, timeout=10)
        assert raw.status_code == 503 and int(raw.headers["retry-after"]) >= 1
        assert "restarting" in raw.json()["detail"] and "exit code -9" in raw.json()["detail"]
        health = requests.get(health_url, timeout=10)
        assert health.status_code == 503 and health.json()["status"] == "restarting"
        assert "exit code -9" in health.json()["detail"] and "retry-after" in health.headers
        # A client whose budget is shorter than the restart times out with a message that says so ...
        with pytest.raises(RetrievalError, match="Retry-After|budget"):
            impatient.search(["Rome"], 1)
        # ... one with the default budget (30 s) waits and gets its answer, with no retries configured.
        patient = HTTPRetriever(HTTPRetrieverConfig(url=server.url, retries=0))
        assert worker.restarting
        assert patient.search(["Rome"], 1)[0][0].doc.id == "d1"
        assert requests.get(health_url, timeout=10).status_code == 200
        assert worker.pid != first and requests.get(health_url, timeout=10).json()["stats"]["restarts"] == 1


def test_requests_in_flight_when_the_retriever_dies_get_503_not_500():
    with BackgroundServer(slow_rank_bm25, PROCESS) as server:
        worker = server.app.state.worker
        with ThreadPoolExecutor(4) as pool:
            pending = [pool.submit(requests.post, server.url, json={"queries": ["Rome"], "topk": 1}, timeout=30)
                       for _ in range(4)]
            time.sleep(0.3)  # the requests are in the child's 1 s search
            os.kill(worker.pid, signal.SIGKILL)
            statuses = sorted(f.result().status_code for f in pending)
        assert statuses == [503] * 4


def test_a_retriever_that_cannot_be_built_stops_the_server_from_starting():
    start = time.monotonic()
    with pytest.raises(RetrievalError, match="did not start.*failed to start: ConfigError: no corpus at /nowhere.jsonl"):
        BackgroundServer(no_corpus, PROCESS, startup_timeout_s=60).start()
    assert time.monotonic() - start < 30  # noticed when the process failed, not at the timeout


def test_a_retriever_process_that_hangs_while_starting_is_stopped_after_the_start_timeout():
    config = ServerConfig(port=0, retriever_process=True, retriever_start_timeout_s=3)
    server = BackgroundServer(hangs, config, startup_timeout_s=60)
    start = time.monotonic()
    with pytest.raises(RetrievalError, match="not ready after 3 s.*it was stopped"):
        server.start()
    assert 3 <= time.monotonic() - start < 30
    pid = server.app.state.worker.pid
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def test_the_start_timeout_is_validated():
    with pytest.raises(ConfigError, match="retriever_start_timeout_s must be > 0"):
        ServerConfig(retriever_start_timeout_s=0)


def test_a_factory_needs_the_retriever_process():
    with pytest.raises(ConfigError, match="factory only with ServerConfig.retriever_process"):
        BackgroundServer(rank_bm25, ServerConfig(port=0))


def test_the_serve_command_builds_its_retriever_in_the_process(tmp_path):
    from searchgym.cli.serve import build_in_process
    from tests.retrieval.conftest import write_jsonl

    path = write_jsonl(tmp_path / "c.jsonl", Corpus(TEN_DOCS))
    factory = pickle.loads(pickle.dumps(functools.partial(build_in_process, None, str(path), None, str(tmp_path / "cache"), 1)))
    assert factory().describe()["kind"] == "bm25"


def test_the_serve_command_refuses_missing_files_before_starting_anything(tmp_path, capsys):
    from searchgym.cli import main

    assert main(["serve", "--corpus", str(tmp_path / "nowhere.jsonl"), "--port", "0"]) == 1
    assert re.search(r"^error: --corpus .*nowhere.jsonl: no such file", capsys.readouterr().err)
    assert main(["serve", "--index", str(tmp_path / "no-index"), "--port", "0"]) == 1
    assert re.search(r"^error: --index .*no-index: no such file or folder", capsys.readouterr().err)


def test_the_serve_command_uses_the_retriever_process_unless_told_not_to():
    from searchgym.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["serve", "--corpus", "c.jsonl"]).retriever_process is (os.name == "posix")
    assert parse(["serve", "--corpus", "c.jsonl", "--no-retriever-process"]).retriever_process is False
