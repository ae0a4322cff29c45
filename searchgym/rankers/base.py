"""The `Ranker` protocol and the identity ranker (retriever order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from searchgym.data.records import QARecord
from searchgym.errors import ConfigError
from searchgym.info import RankerCallRecord
from searchgym.retrieval.base import Hit


@dataclass(frozen=True)
class RankResult:
    """What a ranker chose: positions into the candidate list, best first, and a record of the call."""

    order: tuple[int, ...]
    """Indices into the candidates, at most `k`, unique."""
    call: RankerCallRecord | None = field(default=None)
    """For rankers that call a model: inputs, raw output, parsed order and validity (goes to step info)."""


@runtime_checkable
class Ranker(Protocol):
    def rank(self, question: str, query: str, candidates: Sequence[Hit], k: int) -> RankResult:
        """Choose up to `k` of `candidates` to show; never raises on bad model output."""
        ...

    def describe(self) -> dict[str, Any]:
        ...


class IdentityRanker:
    """Shows the retriever's top `k` in retriever order."""

    def rank(self, question: str, query: str, candidates: Sequence[Hit], k: int) -> RankResult:
        return _first(min(k, len(candidates)))

    def describe(self) -> dict[str, Any]:
        return {"kind": "identity"}


@lru_cache(maxsize=1024)
def _first(n: int) -> RankResult:
    """The first `n` positions; one shared (frozen) result per `n`, as the env asks at every search."""
    return RankResult(order=tuple(range(max(n, 0))))


def resolve_ranker(ranker: str | Ranker | None, records: Sequence[QARecord] | None = None) -> Ranker:
    """A `Ranker` from a name (`identity`; `oracle`, which needs the env's `records` for their gold answers;
    `gold`, which needs them for their gold passages) or the object itself."""
    if ranker is None or ranker == "identity":
        return IdentityRanker()
    if ranker in ("oracle", "gold"):
        if records is None:
            raise ConfigError(f"ranker={ranker!r} needs the questions' records (their gold annotations); pass the ranker object")
        from searchgym.rankers.oracle import GoldPassageRanker, OracleRanker

        return OracleRanker.from_records(records) if ranker == "oracle" else GoldPassageRanker.from_records(records)
    if isinstance(ranker, str):
        raise ConfigError(f"unknown ranker {ranker!r}; use 'identity', 'oracle', 'gold' or pass a Ranker object")
    if not isinstance(ranker, Ranker):
        raise ConfigError(f"ranker must have rank(question, query, candidates, k) and describe(); got {type(ranker).__name__}")
    return ranker
