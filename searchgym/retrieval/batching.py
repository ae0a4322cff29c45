"""What the retrieval server's two ways of running its retriever share, none of it web-framework code:
the Search-R1 answer body, the server's JSON encoding, taking a batch of queued requests and searching
it with one retriever call per `k`, the retriever thread that batches in the server's own process
(`Batcher`), and the warm-up search.

`searchgym.retrieval.server` serves HTTP with these; the retriever process (`searchgym.retrieval.worker`)
uses them without importing the server, so that it never loads FastAPI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

try:
    import orjson
except ImportError:  # the server extra installs it; without it the standard library encodes
    orjson = None

from searchgym.errors import RetrievalError
from searchgym.retrieval.base import Hit, Retriever

if TYPE_CHECKING:
    from searchgym.retrieval.server import ServerConfig

logger = logging.getLogger(__name__)


def render_results(hits: Sequence[Sequence[Hit]], return_scores: bool) -> dict[str, Any]:
    """Search-R1's response body."""
    if return_scores:
        return {
            "result": [
                [{"document": {"id": h.doc.id, "contents": h.doc.contents}, "score": h.score} for h in row]
                for row in hits
            ]
        }
    return {"result": [[{"id": h.doc.id, "contents": h.doc.contents} for h in row] for row in hits]}


@dataclass
class _Job:
    queries: list[str]
    k: int
    future: asyncio.Future


@dataclass
class BatchStats:
    requests: int = 0
    queries: int = 0
    retriever_calls: int = 0
    largest_batch: int = 0
    errors: int = 0
    busy_s: float = field(default=0.0)
    restarts: int = 0
    """Retriever processes started again after one died (`ServerConfig.retriever_process`)."""


class Batcher:
    """Queues jobs and runs them through the retriever in batches, one retriever call at a time.

    The retriever runs in a thread of its own that takes the next batch itself as soon as a call
    returns: the event loop only queues jobs and hands results back to their requests. So while the loop
    writes one batch's responses and reads the next requests, the retriever is already searching the
    jobs that queued up meanwhile (a search kernel that releases the GIL, such as BM25's, then overlaps
    with the loop's work instead of waiting for it).
    """

    def __init__(self, retriever: Retriever, config: ServerConfig):
        self.retriever, self.config = retriever, config
        self.stats = BatchStats()
        self._pending: deque[_Job] = deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # One worker: retrievers need not be thread-safe, and batching replaces parallel calls.
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="searchgym-retriever", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        with self._ready:
            self._stopping = True
            left, self._pending = list(self._pending), deque()
            self._ready.notify()
        for job in left:
            if not job.future.done():
                job.future.set_exception(RetrievalError("server shutting down"))
        # The worker is not joined: a search in progress finishes in its daemon thread, and its results
        # go nowhere (`_deliver` is never scheduled on a closed loop).

    async def submit(self, queries: list[str], k: int) -> list[list[Hit]]:
        assert self._loop is not None, "the batcher is not started"
        job = _Job(queries, k, self._loop.create_future())
        with self._ready:
            if self._stopping:
                raise RetrievalError("server shutting down")
            self._pending.append(job)
            self._ready.notify()
        return await job.future

    def _work(self) -> None:
        """The retriever thread: take what queued up, search it, hand the results to the loop, repeat."""
        wait_s = self.config.batch_wait_ms / 1000
        while True:
            with self._ready:
                idle = not self._pending
                while not self._pending and not self._stopping:
                    self._ready.wait()
                if self._stopping:
                    return
            if idle and wait_s:  # after an idle spell, wait a little for more requests to join this batch
                time.sleep(wait_s)
            with self._ready:
                if self._stopping:
                    return
                jobs = self._take()
            started = time.perf_counter()
            outcome: list[list[list[Hit]]] | None = None
            error: Exception | None = None
            try:
                outcome = search_groups(self.retriever, [(job.queries, job.k) for job in jobs])
            except Exception as e:  # a retriever failure fails this batch's requests, not the server
                logger.exception("retriever failed on a batch of %d requests", len(jobs))
                self.stats.errors += len(jobs)
                error = e
            self.stats.busy_s += time.perf_counter() - started
            try:
                self._loop.call_soon_threadsafe(self._deliver, jobs, outcome, error)  # type: ignore[union-attr]
            except RuntimeError:  # the loop closed while this batch was searched: nobody waits for it
                return

    @staticmethod
    def _deliver(jobs: list[_Job], outcome: list[list[list[Hit]]] | None, error: Exception | None) -> None:
        for i, job in enumerate(jobs):
            if job.future.done():  # the client went away
                continue
            if outcome is None:
                job.future.set_exception(error or RetrievalError("retrieval failed"))
            else:
                job.future.set_result(outcome[i])

    def _take(self) -> list[_Job]:
        """The next batch (called with the lock held)."""
        jobs = take_batch(self._pending, self.config.max_batch_queries, lambda job: len(job.queries))
        total = sum(len(job.queries) for job in jobs)
        self.stats.requests += len(jobs)
        self.stats.queries += total
        self.stats.retriever_calls += 1
        self.stats.largest_batch = max(self.stats.largest_batch, total)
        return jobs


def take_batch(pending: deque, limit: int, size: Callable[[Any], int]) -> list:
    """Jobs from the front of `pending` (removed from it) while their queries add up to at most `limit`,
    and always the first one, however large (it is capped per request)."""
    jobs = [pending.popleft()]
    total = size(jobs[0])
    while pending and total + size(pending[0]) <= limit:
        jobs.append(pending.popleft())
        total += size(jobs[-1])
    return jobs


def search_groups(retriever: Retriever, requests: Sequence[tuple[list[str], int]]) -> list[list[list[Hit]]]:
    """The hits for each (queries, k) request: one retriever call per distinct k among them (usually
    one), the results split back per request."""
    out: list[list[list[Hit]] | None] = [None] * len(requests)
    for k in sorted({k for _, k in requests}):
        members = [i for i, (_, kk) in enumerate(requests) if kk == k]
        queries = [q for i in members for q in requests[i][0]]
        hits = retriever.search(queries, k) if queries else []
        pos = 0
        for i in members:
            n = len(requests[i][0])
            out[i] = hits[pos : pos + n]
            pos += n
    return out  # type: ignore[return-value]


def encode_json(body: Any) -> bytes:
    # Serialized directly: FastAPI's generic encoder walks every nested value and costs more than the
    # search. orjson (the server extra) writes the same compact UTF-8 JSON several times faster.
    try:
        return _dumps(body)
    except (UnicodeEncodeError, TypeError):  # orjson's JSONEncodeError is a TypeError
        # A lone surrogate (from a corpus built in code, or echoed from a query) has no UTF-8 form;
        # ASCII JSON writes it as a \uXXXX escape, which every JSON reader accepts.
        return json.dumps(body, separators=(",", ":")).encode()


def decode_json(body: bytes) -> Any:
    """`json.loads(body)` for a request body, through orjson where installed (several times faster).
    What orjson refuses (NaN, escaped lone surrogates, deep nesting, bad UTF-8) goes to the standard
    library, and so does a float `topk` (orjson reads an integer past 64 bits as a float), so that the
    server accepts and rejects exactly what `json.loads` does, with its messages."""
    if orjson is not None:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
        else:
            if not (isinstance(payload, dict) and isinstance(payload.get("topk"), float)):
                return payload
    return json.loads(body)


def _dumps(body: Any) -> bytes:
    """Compact UTF-8 JSON; raises UnicodeEncodeError or TypeError for a string holding a lone surrogate."""
    if orjson is not None:
        return orjson.dumps(body)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def warm_up(retriever: Retriever) -> None:
    corpus = getattr(retriever, "corpus", None)
    try:
        doc = corpus[0] if corpus is not None and len(corpus) else None
    except (TypeError, IndexError, KeyError):
        doc = None
    query = f"{doc.title} {doc.text[:200]}" if doc is not None else "the first query"
    started = time.perf_counter()
    try:
        retriever.search([query], 1)
    except Exception as e:  # the same failure will reach clients as HTTP 500; starting is still useful for /health
        logger.warning("warm-up search failed: %s: %s", type(e).__name__, e)
        return
    logger.info("warm-up search took %.2f s", time.perf_counter() - started)


def num_docs(retriever: Retriever) -> int | None:
    corpus = getattr(retriever, "corpus", None)
    try:
        return len(corpus) if corpus is not None else None
    except TypeError:
        return None
