"""Seeded random streams and cheap sequential draws.

Everything is drawn from `np.random.default_rng` streams keyed by integers (the seeds and a stream
number); nothing here touches `hash()` or global random state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# Independent random streams, so that e.g. changing the filler text does not reshuffle the relations.
STREAM_NAMES, STREAM_RELATIONS, STREAM_TEXT, STREAM_SPLIT, STREAM_QUESTIONS = 1, 2, 3, 4, 5
# Streams of the options that are off by default: drawn only when the option is on, so a world or a
# question set without them is byte for byte what it was before they existed.
STREAM_DECOYS, STREAM_ASIDES = 6, 7


def stream_rng(*key: int) -> np.random.Generator:
    """A generator seeded by `key` (seeds and a stream number), independent of every other key."""
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


class Draws:
    """Sequential uniform draws from one precomputed row, so that per-entity text choices cost no Generator
    call each. Wraps around if a very long passage consumes the row (still deterministic)."""

    __slots__ = ("_i", "_n", "_row")

    def __init__(self, row: list[float]):
        self._row = row
        self._i = 0
        self._n = len(row)

    def uniform(self) -> float:
        v = self._row[self._i % self._n]
        self._i += 1
        return v

    def index(self, n: int) -> int:
        return int(self.uniform() * n)  # uniform() < 1, so this is < n

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[self.index(len(seq))]

    def integer(self, low: int, high: int, step: int = 1) -> int:
        """Uniform in [low, high] on the grid low + k * step."""
        return low + step * self.index((high - low) // step + 1)
