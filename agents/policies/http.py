"""A small JSON-over-HTTP client with timeouts, bounded retries and typed errors.

Retries follow `searchgym.retry` (the statuses worth retrying, jittered exponential backoff). Worst case
before an error is raised: `(retries + 1) * (timeout + connect timeout) + backoff * (2 ** retries - 1)`
seconds; a refused connection (dead server) fails in about `backoff * (2 ** retries - 1)`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from searchgym.errors import BackendError, BackendTimeout, ConfigError
from searchgym.retry import RETRY_STATUS, backoff_delay, check_retry_knobs

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class HTTPConfig:
    """Timeouts and retries of one server connection."""

    timeout_s: float = 300.0
    """Seconds to wait for an answer (a long generation must fit)."""
    connect_timeout_s: float = 5.0
    retries: int = 2
    """Attempts after the first, for connection errors, timeouts and 408/429/5xx answers."""
    backoff_s: float = 0.5
    """Base wait before a retry: `searchgym.retry.backoff_delay` (doubling, jittered)."""
    api_key: str | None = None
    """Sent as a bearer token when given (never read from the environment here)."""

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ConfigError("timeout_s and connect_timeout_s must be > 0")
        check_retry_knobs("HTTPConfig", self.retries, self.backoff_s)


class JSONClient:
    """Thread-safe: one `httpx.Client` (a connection pool) shared by every call."""

    def __init__(self, base_url: str, config: HTTPConfig | None = None, *, max_connections: int = 64):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"server url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.config = config or HTTPConfig()
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else None
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.Client(base_url=self.base_url, headers=headers, limits=limits, trust_env=False)

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, payload: Any = None, *, timeout_s: float | None = None, retries: int | None = None) -> Any:
        """The decoded JSON answer (or the text when it is not JSON). Raises `BackendTimeout` when every
        attempt timed out, `BackendError` for anything else that failed after the retries, and at once
        for a 4xx answer other than 408/429 (retrying a bad request cannot help)."""
        cfg = self.config
        timeout = httpx.Timeout(timeout_s or cfg.timeout_s, connect=cfg.connect_timeout_s)
        attempts = 1 + (cfg.retries if retries is None else retries)
        url = f"{self.base_url}{path}"
        last: BackendError | None = None
        for attempt in range(attempts):
            if attempt:
                time.sleep(backoff_delay(cfg.backoff_s, attempt))
            try:
                response = self._client.request(method, path, json=payload, timeout=timeout)
            except httpx.TimeoutException as e:
                last = BackendTimeout(f"{method} {url} timed out after {timeout.read}s (attempt {attempt + 1}/{attempts})")
                last.__cause__ = e
                logger.warning("%s", last)
                continue
            except httpx.HTTPError as e:
                last = BackendError(f"{method} {url} failed: {type(e).__name__}: {e} (attempt {attempt + 1}/{attempts}); is the server running?")
                last.__cause__ = e
                logger.warning("%s", last)
                continue
            if response.status_code in RETRY_STATUS:
                last = BackendError(f"{method} {url} answered {response.status_code}: {response.text[:500]}")
                logger.warning("%s (attempt %d/%d)", last, attempt + 1, attempts)
                continue
            if response.status_code >= 400:
                raise BackendError(f"{method} {url} answered {response.status_code}: {response.text[:500]}")
            try:
                return response.json()
            except json.JSONDecodeError:
                return response.text
        assert last is not None
        raise last
