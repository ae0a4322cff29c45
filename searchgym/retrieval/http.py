"""`HTTPRetriever`: a client of any server speaking Search-R1's `/retrieve` protocol.

Request: `POST /retrieve` with `{"queries": [...], "topk": k, "return_scores": true}`.
Response: `{"result": [[{"document": {"id": ..., "contents": "\\"Title\\"\\ntext"}, "score": s}, ...], ...]}`,
one list per query. Servers that ignore `return_scores` and answer bare documents are accepted too (every
score is then 0), as are documents with `title`/`text` instead of `contents`, or without an `id` (the id
is then derived from the contents, so it is stable across calls).

The transport is `searchgym.http.HTTPClient`. Every call is bounded: `timeout_s` is the budget for the
whole `search` call, retries included, and a response that trickles in slower than that is cut off too.
Connection failures and the shared retry statuses but 500 (`_RETRY_STATUS`) are retried with jittered
exponential backoff (`retries` times) while the budget lasts; other HTTP errors are not. A
503 with `Retry-After` (our server while its retriever process restarts) is retried until the budget
runs out, not counted against `retries`, waiting what the server asks (at most `RETRY_AFTER_MAX_S` at a
time), so an env step rides out a restart of a few seconds. Failures raise `RetrievalTimeout` (the
budget ran out) or `RetrievalError` (anything else), never hang. An answer that is not a Search-R1 response
(not JSON, nested deeper than Python reads, the wrong shape, an id or title that is not text, a score that
is not a finite number) is a `RetrievalAnswerError` (a `RetrievalError`), whatever it holds: a server's
answer never raises anything else out of `search`, and so out of `env.step`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import reprlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from searchgym.corpus import Document, split_contents
from searchgym.errors import ConfigError, RetrievalAnswerError, RetrievalError, RetrievalTimeout
from searchgym.http import HTTPClient
from searchgym.retrieval.base import Hit
from searchgym.retry import RETRY_STATUS, check_retry_knobs

_RETRY_STATUS = RETRY_STATUS - {500}
"""The shared retry statuses but 500: the retrieval server answers 500 when its retriever raised, which the
same request would raise again."""

logger = logging.getLogger(__name__)

RETRY_AFTER_MAX_S = 2.0
"""Longest single wait on a server's `Retry-After`: it is an estimate, so the client looks again sooner."""


@dataclass(frozen=True)
class HTTPRetrieverConfig:
    """Where the server is and how long to wait for it."""

    url: str
    """The `/retrieve` endpoint, e.g. `http://127.0.0.1:8000/retrieve` (a bare `http://host:port` gets `/retrieve` appended)."""
    timeout_s: float = 30.0
    """Budget for one `search` call, all attempts together."""
    retries: int = 2
    """Extra attempts after a connection failure or a retryable answer (`searchgym.retry.RETRY_STATUS` but 500)."""
    backoff_s: float = 0.2
    """Base wait before a retry: `searchgym.retry.backoff_delay` (doubling, jittered)."""
    max_queries_per_request: int = 256
    """Larger batches are split into several requests (servers cap request sizes)."""
    max_response_bytes: int = 256 * 2**20
    """A larger response is refused rather than read into memory."""
    corpus_hash: str | None = None
    """The served corpus's hash, if known; recorded in `describe()` so caches and results are pinned to it."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as `Authorization: Bearer <key>` on every request, for a server started with an API key."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"HTTPRetrieverConfig.url must be an http(s) URL such as http://127.0.0.1:8000/retrieve, got {self.url!r}"
            )
        if not self.timeout_s > 0:
            raise ConfigError(f"HTTPRetrieverConfig.timeout_s must be > 0, got {self.timeout_s}")
        check_retry_knobs("HTTPRetrieverConfig", self.retries, self.backoff_s)
        if self.max_queries_per_request < 1:
            raise ConfigError(
                f"HTTPRetrieverConfig.max_queries_per_request must be >= 1, got {self.max_queries_per_request}"
            )

    @property
    def endpoint(self) -> str:
        parts = urlsplit(self.url)
        return self.url if parts.path not in ("", "/") else self.url.rstrip("/") + "/retrieve"


class HTTPRetriever:
    """A `Retriever` backed by a Search-R1-compatible retrieval server (ours: `searchgym serve`).

    Thread-safe: one connection pool is shared by every thread.
    """

    def __init__(self, config: HTTPRetrieverConfig | str):
        self.config = HTTPRetrieverConfig(url=config) if isinstance(config, str) else config
        auth = {"authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        self._http = HTTPClient(
            headers=auth,
            max_connections=64,
            error=RetrievalError,
            timeout_error=RetrievalTimeout,
            invalid_error=RetrievalAnswerError,
            hint="Is it running (searchgym serve ...)?",
            retry_status=_RETRY_STATUS,
            retry_after_max_s=RETRY_AFTER_MAX_S,
            max_response_bytes=self.config.max_response_bytes,
        )
        self._remote: dict[str, Any] | None = None
        self._remote_checked = False
        self._lock = threading.Lock()

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if k <= 0 or not queries:
            return [[] for _ in queries]
        deadline = time.monotonic() + self.config.timeout_s
        step = self.config.max_queries_per_request
        results: list[list[Hit]] = []
        for start in range(0, len(queries), step):
            batch = list(queries[start : start + step])
            payload = {"queries": batch, "topk": k, "return_scores": True}
            body = self._post(payload, deadline)
            try:
                results.extend(parse_response(body, len(batch), k, self.config.endpoint))
            except RetrievalError:
                raise
            except Exception as e:  # noqa: BLE001 - untrusted data: any other failure is still a malformed answer
                raise RetrievalAnswerError(f"{self.config.endpoint} answered something unreadable "
                                           f"({type(e).__name__}: {str(e)[:200]})") from e
        return results

    def describe(self) -> dict[str, Any]:
        """The endpoint, and the server's own description when it answers `GET /health` (ours does)."""
        return {
            "kind": "http",
            "url": self.config.endpoint,
            "corpus_hash": self._corpus_hash(),
            "remote": self._remote_description(),
        }

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HTTPRetriever:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- transport ------------------------------------------------------------------------------------

    def _post(self, payload: dict[str, Any], deadline: float) -> Any:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            raise RetrievalTimeout(
                f"retrieval server at {self.config.endpoint} did not answer within {self.config.timeout_s:g} s"
            )
        c = self.config
        return self._http.request(
            "POST", c.endpoint, payload, timeout_s=left_s, budget_s=left_s, retries=c.retries, backoff_s=c.backoff_s
        )

    def _remote_description(self) -> dict[str, Any] | None:
        with self._lock:
            if not self._remote_checked:
                self._remote_checked = True
                health = self.config.endpoint.rsplit("/", 1)[0] + "/health"
                try:
                    timeout_s = min(5.0, self.config.timeout_s)
                    answer = self._http.request("GET", health, timeout_s=timeout_s, retries=0, backoff_s=0.0)
                    self._remote = answer.get("retriever") if isinstance(answer, dict) else None
                except RetrievalError as e:
                    logger.debug("no description from %s: %s", health, e)
            return self._remote

    def _corpus_hash(self) -> str | None:
        if self.config.corpus_hash is not None:
            return self.config.corpus_hash
        remote = self._remote_description()
        return remote.get("corpus_hash") if isinstance(remote, dict) else None


# -- response parsing (pure) --------------------------------------------------------------------------

_PREVIEW = reprlib.Repr()
"""Bounded previews of answers in messages: a deeply nested or huge value never reaches `str()` whole."""
_PREVIEW.maxlevel, _PREVIEW.maxstring, _PREVIEW.maxother, _PREVIEW.maxlist, _PREVIEW.maxdict = 3, 120, 60, 4, 4


def parse_response(body: Any, num_queries: int, k: int, url: str = "the server") -> list[list[Hit]]:
    """Hits from a Search-R1 `/retrieve` response body; `RetrievalAnswerError` when its shape is wrong."""
    if not isinstance(body, dict) or not isinstance(body.get("result"), list):
        raise RetrievalAnswerError(f"{url} answered without a 'result' list: {_PREVIEW.repr(body)}")
    result = body["result"]
    if len(result) != num_queries:
        raise RetrievalAnswerError(f"{url} answered {len(result)} result lists for {num_queries} queries")
    out = []
    for q, items in enumerate(result):
        if not isinstance(items, list):
            raise RetrievalAnswerError(f"{url}: result {q} is a {type(items).__name__}, expected a list of documents")
        out.append([_hit(item, url, q) for item in items[:k]])
    return out


def _hit(item: Any, url: str, q: int) -> Hit:
    if isinstance(item, dict) and "document" in item:
        doc, score = item["document"], item.get("score", 0.0)
    else:
        doc, score = item, 0.0
    if not isinstance(doc, dict):
        raise RetrievalAnswerError(f"{url}: result {q} holds a {type(doc).__name__}, expected a document object")
    quoted = True
    if isinstance(doc.get("contents"), str):
        title, text, quoted = split_contents(doc["contents"])
    elif isinstance(doc.get("text"), str):
        title, text = doc.get("title", ""), doc["text"]
        if not isinstance(title, str):
            raise RetrievalAnswerError(f"{url}: a document title of result {q} is not text: {_PREVIEW.repr(title)}")
    else:
        raise RetrievalAnswerError(f"{url}: a document of result {q} has neither 'contents' nor 'text': {_PREVIEW.repr(doc)}")
    doc_id = doc.get("id")
    if doc_id is None:
        # Pyserini-backed servers omit ids; a content digest keeps them stable for caches and rankers.
        doc_id = "sha1:" + hashlib.sha1(f"{title}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()[:16]
    elif isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise RetrievalAnswerError(f"{url}: a document id of result {q} is neither text nor an integer: {_PREVIEW.repr(doc_id)}")
    return Hit(Document(str(doc_id), title, text, quoted), _score(score, url, q))


def _score(score: Any, url: str, q: int) -> float:
    """A finite float (a number, or a string holding one, as some servers send)."""
    if not isinstance(score, bool) and isinstance(score, (int, float, str)):
        try:
            value = float(score)
        except (ValueError, OverflowError):  # OverflowError: an integer past float's range
            value = math.nan
        if math.isfinite(value):
            return value
    raise RetrievalAnswerError(f"{url}: a score of result {q} is not a finite number: {_PREVIEW.repr(score)}")
