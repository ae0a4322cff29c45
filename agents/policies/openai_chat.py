"""`OpenAIPolicy`: an OpenAI-compatible chat client, for evaluating served or API models (no training).

It works on chat messages, not token ids, so it cannot feed a learner; `agents.rollout.chat` runs
episodes with it. It also satisfies `searchgym.backends.ChatBackend`, so it can stand behind an LLM judge
or ranker. The API key is passed explicitly (the CLI may read it from the environment; this class never
does).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agents.policies.base import SamplingParams
from agents.policies.http import HTTPConfig, JSONClient
from searchgym.backends import ChatMessage
from searchgym.errors import BackendError, ConfigError


@dataclass(frozen=True)
class OpenAIPolicyConfig:
    base_url: str = "http://127.0.0.1:30000/v1"
    """The API root (ending in /v1), e.g. an SGLang or vLLM server's OpenAI-compatible endpoint."""
    model: str = "default"
    http: HTTPConfig = field(default_factory=lambda: HTTPConfig(timeout_s=120.0))
    max_concurrency: int = 16
    max_stop_strings: int = 4
    """OpenAI's API accepts at most 4 stop strings."""

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {self.max_concurrency}")


@dataclass
class ChatCompletion:
    text: str
    finish_reason: str
    """`stop`, `length`, or what the server says."""
    matched_stop: str | None = None
    """The stop string that ended the text, when the server reports it (SGLang does); the text excludes it."""


class OpenAIPolicy:
    def __init__(self, config: OpenAIPolicyConfig | None = None):
        self.config = config or OpenAIPolicyConfig()
        self.client = JSONClient(self.config.base_url, self.config.http, max_connections=self.config.max_concurrency)
        self._pool = ThreadPoolExecutor(self.config.max_concurrency)

    def close(self) -> None:
        self._pool.shutdown()
        self.client.close()

    def complete(self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams) -> list[list[ChatCompletion]]:
        """`params.n` replies per conversation (`top_k` and `seed` are sent as extensions when set)."""
        if len(params.stop) > self.config.max_stop_strings:
            raise ConfigError(f"at most {self.config.max_stop_strings} stop strings, got {len(params.stop)}")
        body: dict[str, Any] = {
            "model": self.config.model,
            "n": params.n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.top_k > 0:
            body["top_k"] = params.top_k
        if params.seed is not None:
            body["seed"] = params.seed
        futures = [self._pool.submit(self._one, {**body, "messages": [dict(m) for m in conv]}, params.n) for conv in conversations]
        return [f.result() for f in futures]

    def _one(self, body: dict[str, Any], n: int) -> list[ChatCompletion]:
        answer = self.client.request("POST", "/chat/completions", body)
        try:
            choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
            out = [
                ChatCompletion(
                    text=c["message"].get("content") or "",
                    finish_reason=c.get("finish_reason") or "stop",
                    matched_stop=c.get("matched_stop") if isinstance(c.get("matched_stop"), str) else None,
                )
                for c in choices
            ]
        except (KeyError, TypeError, AttributeError) as e:
            raise BackendError(f"unexpected chat completion answer: {str(answer)[:300]}") from e
        if len(out) != n:
            raise BackendError(f"asked for {n} choices, got {len(out)}")
        return out

    # -- searchgym.backends.ChatBackend -------------------------------------------------------------------

    def chat(self, conversations: Sequence[Sequence[ChatMessage]], *, max_tokens: int = 512, temperature: float = 0.0) -> list[str]:
        params = SamplingParams(temperature=temperature, max_new_tokens=max_tokens)
        return [c[0].text for c in self.complete(conversations, params)]

    def describe(self) -> dict[str, Any]:
        return {"policy": "openai", "base_url": self.config.base_url, "model": self.config.model}
