"""`HTTPClient`: the one JSON-over-HTTP client under every server this project talks to (the retrieval
server, OpenAI-compatible chat servers, SGLang and its router).

`HTTPClient.request` sends one JSON request and returns the decoded answer:

- every attempt has a timeout, and the whole answer must arrive within it (a server that trickles bytes
  is cut off too); `budget_s`, when given, also bounds the whole call, retries and waits included;
- connection failures, timeouts and answers in `retry_status` (`searchgym.retry.RETRY_STATUS` by default)
  are retried `retries` times, after `searchgym.retry.backoff_delay(backoff_s, attempt)` (doubling,
  jittered); any other 4xx/5xx answer fails at once, since the same request would fail again;
- with `retry_after_max_s` set, a 503 carrying `Retry-After` (a server restarting a worker) is waited on
  within the budget and not counted against `retries`;
- failures raise the caller's typed errors: `timeout_error` when the last failure was a timeout or the
  budget ran out, `invalid_error` for an answer that is not JSON (undecodable, nested or sized past what
  Python reads), `error` for anything else, each naming the request, the attempts and the cause; those
  that may mean the server is down or overloaded end with the caller's `hint` (what to check).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from searchgym.errors import BackendError, BackendTimeout, ConfigError, SearchGymError
from searchgym.retry import RETRY_STATUS, backoff_delay

__all__ = ["HTTPClient", "RetryAnswer"]

logger = logging.getLogger(__name__)


class RetryAnswer(Exception):
    """Raised by an `extract` function for a 200 answer worth asking for again (a proxy's error page, a
    body cut short under load): the attempt counts as a failure and is retried like a 503."""


class _Refused(Exception):
    """One attempt got an answer that asking again cannot change (a 4xx but 408/425/429)."""


class _Failed(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, cause: str, *, timeout: bool = False, retry_after_s: float | None = None):
        super().__init__(cause)
        self.timeout = timeout
        self.retry_after_s = retry_after_s


class HTTPClient:
    """A connection pool plus the retry rules. Thread-safe: every thread shares the pool.

    `error` and `timeout_error` are the typed errors this client's user raises (e.g. `RetrievalError` and
    `RetrievalTimeout`); `timeout_error` should subclass `error`, and so should `invalid_error`, raised for
    an answer that is not JSON (`error` when not given).
    """

    def __init__(
        self,
        *,
        base_url: str = "",
        headers: Mapping[str, str] | None = None,
        max_connections: int = 64,
        trust_env: bool = True,
        error: type[SearchGymError] = BackendError,
        timeout_error: type[SearchGymError] = BackendTimeout,
        hint: str = "Check that the server is running and reachable.",
        invalid_error: type[SearchGymError] | None = None,
        retry_status: frozenset[int] = RETRY_STATUS,
        retry_after_max_s: float | None = None,
        max_response_bytes: int | None = None,
    ):
        try:
            import httpx
        except ImportError as e:
            raise ConfigError("searchgym's HTTP clients need httpx: pip install 'searchgym[server]'") from e
        self._httpx = httpx
        self.base_url = base_url.rstrip("/")
        self.error, self.timeout_error, self.hint = error, timeout_error, hint
        self.invalid_error = invalid_error or error
        self.retry_status = frozenset(retry_status)
        self.retry_after_max_s = retry_after_max_s
        self.max_response_bytes = max_response_bytes
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.Client(headers=dict(headers or {}), limits=limits, trust_env=trust_env)

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        timeout_s: float,
        retries: int,
        backoff_s: float,
        connect_timeout_s: float | None = None,
        budget_s: float | None = None,
        invalid_json: Literal["raise", "retry", "text"] = "raise",
        extract: Callable[[Any], Any] | None = None,
    ) -> Any:
        """The answer to `method base_url+path` with `payload` as its JSON body (none when `payload` is None).

        `invalid_json` says what a 200 answer that is not JSON means: an error (`"raise"`), a failure worth
        retrying (`"retry"`), or a text answer, returned as a `str` (`"text"`). `extract`, when given, maps
        the decoded answer to the return value and may raise `RetryAnswer`.
        """
        url = self.base_url + path
        name = f"{method} {url}"
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"content-type": "application/json"} if data is not None else {}
        deadline = None if budget_s is None else time.monotonic() + budget_s
        attempt, waits = 0, 0
        while True:
            left_s = None if deadline is None else deadline - time.monotonic()
            budget_binds = left_s is not None and left_s <= timeout_s
            attempt_s = left_s if budget_binds else timeout_s
            if attempt_s <= 0:
                raise self.timeout_error(f"{name} did not answer within the {budget_s:g} s budget. {self.hint}")
            tries = attempt + 1
            try:
                return self._attempt(
                    method, url, data, headers, attempt_s, connect_timeout_s, invalid_json, extract, name
                )
            except _Refused as refused:
                raise self.error(f"{name} failed after {tries} attempt{'s' * (tries != 1)}: {refused}") from None
            except _Failed as failed:
                if failed.timeout and budget_binds:
                    # The budget, not the attempt's own timeout, cut this attempt short: nothing is left.
                    raise self.timeout_error(
                        f"{name} did not answer within the {budget_s:g} s budget ({failed}). {self.hint}"
                    ) from failed.__cause__
                if failed.retry_after_s is not None and self.retry_after_max_s is not None and deadline is not None:
                    # The server is up and says when to come back: wait within the budget, not the retry count.
                    pause = min(max(failed.retry_after_s, backoff_s), self.retry_after_max_s)
                    if time.monotonic() + pause >= deadline:
                        raise self.timeout_error(
                            f"{name} still unavailable when the {budget_s:g} s budget ran out "
                            f"({waits + 1} answers with Retry-After): {failed}. {self.hint}"
                        ) from None
                    waits += 1
                    logger.debug("%s asks to retry after %.1f s: %s", name, failed.retry_after_s, failed)
                    time.sleep(pause)
                    continue
                if attempt >= retries:
                    kind = self.timeout_error if failed.timeout else self.error
                    verb = "timed out" if failed.timeout else "failed"
                    raise kind(
                        f"{name} {verb} after {tries} attempt{'s' * (tries != 1)}: {failed}. {self.hint}"
                    ) from failed.__cause__
                attempt += 1
                pause = backoff_delay(backoff_s, attempt)
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise self.timeout_error(
                        f"{name} still failing when the {budget_s:g} s budget ran out, after {tries} "
                        f"attempt{'s' * (tries != 1)}: {failed}. {self.hint}"
                    ) from failed.__cause__
                logger.warning(
                    "%s failed (attempt %d of %d), retrying in %.2f s: %s", name, tries, retries + 1, pause, failed
                )
                time.sleep(pause)

    def _attempt(self, method, url, data, headers, attempt_s, connect_timeout_s, invalid_json, extract, name) -> Any:
        httpx = self._httpx
        connect = attempt_s if connect_timeout_s is None else min(connect_timeout_s, attempt_s)
        timeout = httpx.Timeout(attempt_s, connect=connect)
        ends = time.monotonic() + attempt_s
        try:
            with self._client.stream(method, url, content=data, headers=headers, timeout=timeout) as response:
                raw = self._read(response, ends, attempt_s, name)
                status, retry_after = response.status_code, _seconds(response.headers.get("retry-after"))
        except httpx.TimeoutException as e:
            raise _Failed(f"no answer within {attempt_s:g} s ({type(e).__name__})", timeout=True) from e
        except (httpx.TransportError, httpx.StreamError) as e:
            raise _Failed(f"connection failed ({type(e).__name__}: {e})") from e
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise self.error(f"{name} could not be sent ({type(e).__name__}: {e})") from e
        if status >= 400:
            cause = f"HTTP {status}: {raw[:300].decode('utf-8', 'replace')}"
            if status in self.retry_status:
                raise _Failed(cause, retry_after_s=retry_after if status == 503 else None)
            raise _Refused(cause)
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as e:
            # ValueError: not JSON, not UTF-8, or an integer of over 4300 digits; RecursionError: nested
            # deeper than the decoder goes. All of them an answer that is not what was asked for.
            if invalid_json == "text":
                return raw.decode("utf-8", "replace")
            if invalid_json == "retry":
                raise _Failed(f"an answer that is not JSON ({e}): {raw[:200]!r}") from e
            raise self.invalid_error(f"{name} answered with invalid JSON ({type(e).__name__}: {str(e)[:200]}): {raw[:200]!r}") from e
        if extract is None:
            return body
        try:
            return extract(body)
        except RetryAnswer as e:
            raise _Failed(str(e)) from e

    def _read(self, response, ends: float, attempt_s: float, name: str) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if self.max_response_bytes is not None and size > self.max_response_bytes:
                raise self.error(
                    f"{name} sent more than {self.max_response_bytes} bytes; ask for less or raise max_response_bytes"
                )
            chunks.append(chunk)
            if time.monotonic() > ends:
                raise _Failed(f"still sending its answer after {attempt_s:g} s", timeout=True)
        return b"".join(chunks)


def _seconds(value: str | None) -> float | None:
    """A `Retry-After` in seconds (the HTTP-date form is not used by the servers here: None)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < 3600 else None
