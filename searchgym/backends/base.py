"""The `ChatBackend` protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypedDict, runtime_checkable


class ChatMessage(TypedDict):
    role: str
    """`system`, `user` or `assistant`."""
    content: str


@runtime_checkable
class ChatBackend(Protocol):
    """Generates one reply per conversation, for a batch of conversations."""

    def chat(self, conversations: Sequence[Sequence[ChatMessage]], *, max_tokens: int = 512, temperature: float = 0.0) -> list[str]:
        """One reply per conversation, in order. Raises `searchgym.errors.BackendError` after the
        backend's bounded retries fail; callers that must not raise (judges, rankers) catch it and record
        the failure."""
        ...

    def describe(self) -> dict[str, Any]:
        """Model name and sampling-relevant settings, for caches and result fingerprints."""
        ...
