"""The `Retriever` protocol, `Hit`, and building a retriever from a name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from searchgym.corpus import Corpus, Document
from searchgym.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved document and its retrieval score (higher is better; scales differ by retriever)."""

    doc: Document
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Anything that ranks documents for a batch of queries."""

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """The top `k` hits for each query, best first. A query that matches nothing gets fewer hits
        (possibly none); a retriever never pads with unrelated documents."""
        ...

    def describe(self) -> dict[str, Any]:
        """A JSON-serializable description (kind, parameters, corpus hash) for caches and result
        fingerprints: two retrievers with equal descriptions return equal results."""
        ...


def resolve_retriever(retriever: str | Retriever, corpus: Corpus | None, *, cache_dir: str | Path | None = None) -> Retriever:
    """A retriever from a name (`bm25`, `bm25s`, `rank_bm25`) over `corpus`, or an instance passed through."""
    if not isinstance(retriever, str):
        if not isinstance(retriever, Retriever):
            raise ConfigError(f"retriever must be a name or an object with search(queries, k) and describe(); got {type(retriever).__name__}")
        return retriever
    if corpus is None:
        raise ConfigError(f"retriever {retriever!r} needs a corpus: pass corpus_path=... or a retriever object (e.g. an HTTP retriever)")
    from searchgym.retrieval.bm25 import BM25Retriever

    if retriever in ("bm25", "bm25s"):
        return BM25Retriever(corpus, backend="bm25s", cache_dir=cache_dir)
    if retriever == "rank_bm25":
        return BM25Retriever(corpus, backend="rank_bm25")
    raise ConfigError(f"unknown retriever {retriever!r}; choose 'bm25' (bm25s), 'rank_bm25', or pass a Retriever object")
