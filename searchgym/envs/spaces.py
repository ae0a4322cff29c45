"""`UnicodeText`: a Gymnasium text space that admits any Unicode string."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces


class UnicodeText(spaces.Text):
    """Any `str` of at most `max_length` characters.

    Gymnasium's `Text` only admits characters from a fixed charset; an LLM's text and a corpus's
    documents use all of Unicode. Sampling still draws from Gymnasium's alphanumeric charset, which is
    enough for `check_env` and random-agent baselines.
    """

    def __init__(self, max_length: int, *, seed: int | None = None):
        super().__init__(max_length=max_length, min_length=0, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.max_length})"
