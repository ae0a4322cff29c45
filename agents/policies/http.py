"""The policy servers' JSON client (SGLang, its router, OpenAI-compatible servers): `HTTPConfig` and a
`JSONClient` over `searchgym.http.HTTPClient`.

Retries follow `searchgym.retry` (the statuses worth retrying, jittered exponential backoff). Worst case
before an error is raised: `(retries + 1) * (timeout + connect timeout) + backoff * (2 ** retries - 1)`
seconds; a refused connection (dead server) fails in about `backoff * (2 ** retries - 1)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from searchgym.errors import ConfigError
from searchgym.http import HTTPClient
from searchgym.retry import check_retry_knobs


@dataclass(frozen=True)
class HTTPConfig:
    """Timeouts and retries of one server connection."""

    timeout_s: float = 300.0
    """Seconds to wait for an answer (a long generation must fit)."""
    connect_timeout_s: float = 5.0
    """Seconds to wait for the connection itself (a dead server fails this fast)."""
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
    """A server's JSON API under `base_url` over `searchgym.http.HTTPClient`, with `HTTPConfig`'s timeouts
    and retries. Thread-safe: one connection pool is shared by every call."""

    def __init__(self, base_url: str, config: HTTPConfig | None = None, *, max_connections: int = 64):
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"server url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.config = config or HTTPConfig()
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else None
        # trust_env=False: these servers are local or on the cluster's network, never behind the user's proxy.
        self._http = HTTPClient(
            base_url=self.base_url, headers=headers, max_connections=max_connections, trust_env=False,
            hint="Check its log: is the server running, and reachable at that address?",
        )

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, payload: Any = None, *, timeout_s: float | None = None, retries: int | None = None) -> Any:
        """The decoded JSON answer (or the text when it is not JSON). Raises `BackendTimeout` when the last
        attempt timed out, `BackendError` for anything else that failed after the retries, and at once
        for a 4xx answer other than 408/425/429 (retrying a bad request cannot help)."""
        cfg = self.config
        return self._http.request(
            method, path, payload,
            timeout_s=timeout_s or cfg.timeout_s, connect_timeout_s=cfg.connect_timeout_s,
            retries=cfg.retries if retries is None else retries, backoff_s=cfg.backoff_s, invalid_json="text",
        )
