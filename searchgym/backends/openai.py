"""`OpenAIChatBackend`: an OpenAI-compatible `/v1/chat/completions` client (SGLang, vLLM, OpenAI, ...).

Each conversation of a batch is one HTTP request; a batch's requests run concurrently on a small thread
pool (SGLang and vLLM batch concurrent requests on the server). The transport is `searchgym.http.HTTPClient`:
every request has a connect and a read timeout; failures that may pass (connection errors, timeouts,
`searchgym.retry.RETRY_STATUS` answers, an unreadable body) are retried `retries` times with jittered
exponential backoff, then raise `BackendTimeout` (the last failure was a timeout) or `BackendError`. Other
HTTP errors (400, 401, 404...) raise at once. So a dead server raises
after at most `(retries + 1) * (connect_timeout_s + backoff)` seconds and a hung one after at most
`(retries + 1) * (timeout_s + backoff)`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from searchgym.backends.base import ChatMessage
from searchgym.errors import BackendError, BackendTimeout, ConfigError
from searchgym.http import HTTPClient, RetryAnswer
from searchgym.retry import check_retry_knobs

__all__ = ["OpenAIChatBackend", "OpenAIConfig"]


@dataclass(frozen=True)
class OpenAIConfig:
    """Where the OpenAI-compatible server is, which model it serves, and how long to wait for it."""

    base_url: str
    """The server's API root, e.g. `http://127.0.0.1:30000/v1` (SGLang) or `http://127.0.0.1:8000/v1` (vLLM)."""
    model: str
    """The `model` field of each request (the served model's name)."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as a bearer token when given; never read from the environment by the library."""
    timeout_s: float = 120.0
    """Read timeout of one request, in seconds (a judge reply with analysis can take a while)."""
    connect_timeout_s: float = 5.0
    """Seconds to wait for the connection itself (a dead server fails this fast)."""
    retries: int = 2
    """Retries after the first attempt, for failures that may pass."""
    backoff_s: float = 0.5
    """Wait before the first retry; doubles for each further retry."""
    max_concurrency: int = 16
    """Requests of one batch in flight at once."""
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    """Extra request fields, e.g. `{"chat_template_kwargs": {"enable_thinking": False}}` for Qwen3 on SGLang."""

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"OpenAIConfig.base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ConfigError("OpenAIConfig.model must name the served model")
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ConfigError("OpenAIConfig timeouts must be > 0 seconds")
        check_retry_knobs("OpenAIConfig", self.retries, self.backoff_s)
        if self.max_concurrency < 1:
            raise ConfigError(f"OpenAIConfig.max_concurrency must be >= 1, got {self.max_concurrency}")


class OpenAIChatBackend:
    """A `ChatBackend` over an OpenAI-compatible HTTP server. Close it (or use `with`) to free its
    connections."""

    def __init__(self, config: OpenAIConfig):
        self.config = config
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._http = HTTPClient(
            headers={"Authorization": f"Bearer {config.api_key}"} if config.api_key else {},
            max_connections=config.max_concurrency,
            hint=f"Check that the server is up and serves model {config.model!r}, or raise timeout_s",
        )

    def describe(self) -> dict[str, Any]:
        return {"kind": "openai", "base_url": self.config.base_url, "model": self.config.model, "extra_body": dict(self.config.extra_body)}

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAIChatBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(self, conversations: Sequence[Sequence[ChatMessage]], *, max_tokens: int = 512, temperature: float = 0.0) -> list[str]:
        convs = [list(c) for c in conversations]
        if len(convs) <= 1:
            return [self._complete(c, max_tokens, temperature) for c in convs]
        with ThreadPoolExecutor(max_workers=min(self.config.max_concurrency, len(convs)), thread_name_prefix="openai-chat") as pool:
            futures = [pool.submit(self._complete, c, max_tokens, temperature) for c in convs]
            errors = []
            replies = []
            for f in futures:
                try:
                    replies.append(f.result())
                except BackendError as e:
                    errors.append(e)
        if errors:
            first = errors[0]
            kind = BackendTimeout if all(isinstance(e, BackendTimeout) for e in errors) else BackendError
            raise kind(f"{len(errors)} of {len(convs)} chat requests failed; first: {first}") from first
        return replies

    def _complete(self, messages: list[ChatMessage], max_tokens: int, temperature: float) -> str:
        body = {**self.config.extra_body, "model": self.config.model, "messages": messages,
                "max_tokens": max_tokens, "temperature": temperature}
        c = self.config
        return self._http.request("POST", self._url, body, timeout_s=c.timeout_s, connect_timeout_s=c.connect_timeout_s,
                                  retries=c.retries, backoff_s=c.backoff_s, invalid_json="retry", extract=_content)


def _content(answer: Any) -> str:
    """The reply text of a chat completion; `RetryAnswer` for a body of another shape (a proxy's page, a
    body cut short), which a second request usually cures."""
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as e:
        shape = f"({type(e).__name__}): {str(answer)[:200]}"
        raise RetryAnswer(f"an answer without choices[0].message.content {shape}") from e
    if content is None:
        return ""
    if not isinstance(content, str):
        raise RetryAnswer(f"message content is {type(content).__name__}, not text")
    return content
