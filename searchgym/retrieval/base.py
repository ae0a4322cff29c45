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
    """A retriever from a name over `corpus`, or an instance passed through.

    Names: `bm25` (bm25s), `rank_bm25`, `dense` (all-MiniLM-L6-v2, exact FAISS search), `hybrid` (BM25 and
    dense fused by reciprocal rank), or the URL of a Search-R1-compatible server (`http://host:port/retrieve`,
    which needs no corpus). Indexes are cached under `cache_dir`.
    """
    if not isinstance(retriever, str):
        if not isinstance(retriever, Retriever):
            raise ConfigError(f"retriever must be a name or an object with search(queries, k) and describe(); got {type(retriever).__name__}")
        return retriever
    if retriever.startswith(("http://", "https://")):
        from searchgym.retrieval.http import HTTPRetriever

        return HTTPRetriever(retriever)
    if retriever not in ("bm25", "bm25s", "rank_bm25", "dense", "hybrid"):
        raise ConfigError(f"unknown retriever {retriever!r}; choose 'bm25' (bm25s), 'rank_bm25', 'dense', 'hybrid', a server URL, or pass a Retriever object")
    if corpus is None:
        raise ConfigError(f"retriever {retriever!r} needs a corpus: pass corpus_path=... or a retriever object (e.g. an HTTP retriever)")
    from searchgym.retrieval.bm25 import BM25Retriever

    if retriever in ("bm25", "bm25s"):
        return BM25Retriever(corpus, backend="bm25s", cache_dir=cache_dir)
    if retriever == "rank_bm25":
        return BM25Retriever(corpus, backend="rank_bm25")
    from searchgym.retrieval.dense import DenseRetriever

    dense = DenseRetriever(corpus, cache_dir=cache_dir)
    if retriever == "dense":
        return dense
    from searchgym.retrieval.hybrid import HybridRetriever

    return HybridRetriever([BM25Retriever(corpus, backend="bm25s", cache_dir=cache_dir), dense])
