"""Hybrid retrieval: several retrievers fused by reciprocal rank fusion (Cormack et al., 2009).

RRF needs no score calibration between retrievers (BM25 scores and cosine similarities live on
different scales): a document's fused score is sum_r w_r / (rrf_k + rank_r), with rank_r its 1-based
rank in retriever r's list, and retrievers that did not return it contribute nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.errors import ConfigError
from searchgym.retrieval.base import Hit, Retriever


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], *, rrf_k: float = 60.0, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked id lists into one, best first, as (id, fused score) pairs.

    Ties keep the order in which ids were first met, scanning the lists position by position, so the
    result never depends on set or dict hashing. An id repeated within one list counts at its best rank.

    >>> reciprocal_rank_fusion([["a", "b"], ["b", "c"]], rrf_k=1)
    [('b', 0.8333333333333333), ('a', 0.5), ('c', 0.3333333333333333)]
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ConfigError(f"got {len(weights)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    for r, (ranking, w) in enumerate(zip(rankings, weights)):
        seen: set[str] = set()
        for pos, doc_id in enumerate(ranking):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + w / (rrf_k + pos + 1)
            key = (pos, r)
            if doc_id not in first_seen or key < first_seen[doc_id]:
                first_seen[doc_id] = key
    return sorted(scores.items(), key=lambda item: (-item[1], first_seen[item[0]]))


@dataclass(frozen=True)
class HybridConfig:
    """How member retrievers' lists are fused."""

    rrf_k: float = 60.0
    """The RRF constant; 60 is the value of the original paper and of most systems since."""
    weights: tuple[float, ...] | None = None
    """One weight per retriever (default: all 1)."""
    depth: int = 100
    """Hits taken from each retriever before fusing (at least the k asked for)."""

    def __post_init__(self) -> None:
        if self.rrf_k < 0:
            raise ConfigError(f"HybridConfig.rrf_k must be >= 0, got {self.rrf_k}")
        if self.depth < 1:
            raise ConfigError(f"HybridConfig.depth must be >= 1, got {self.depth}")
        if self.weights is not None and any(w < 0 for w in self.weights):
            raise ConfigError(f"HybridConfig.weights must be non-negative, got {self.weights}")


class HybridRetriever:
    """Reciprocal rank fusion of several retrievers over the same corpus (typically BM25 + dense).

    A hit's score is its fused RRF score.
    """

    def __init__(self, retrievers: Sequence[Retriever], config: HybridConfig | None = None):
        if len(retrievers) < 2:
            raise ConfigError("HybridRetriever needs at least two retrievers to fuse")
        self.retrievers = list(retrievers)
        self.config = config or HybridConfig()
        if self.config.weights is not None and len(self.config.weights) != len(self.retrievers):
            raise ConfigError(
                f"HybridConfig.weights has {len(self.config.weights)} entries for {len(self.retrievers)} retrievers"
            )
        hashes = {r.describe().get("corpus_hash") for r in self.retrievers}
        if len(hashes) > 1:
            raise ConfigError(
                f"hybrid members index different corpora (corpus hashes {sorted(map(str, hashes))}); fuse retrievers over one corpus"
            )
        self.corpus_hash = hashes.pop()
        self.corpus = getattr(self.retrievers[0], "corpus", None)
        """The members' shared corpus, where the first member exposes it (servers report its size)."""

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if k <= 0 or not queries:
            return [[] for _ in queries]
        depth = max(k, self.config.depth)
        member_hits = [r.search(queries, depth) for r in self.retrievers]
        results = []
        for q in range(len(queries)):
            lists = [hits[q] for hits in member_hits]
            docs = {h.doc.id: h.doc for hits in reversed(lists) for h in hits}
            fused = reciprocal_rank_fusion(
                [[h.doc.id for h in hits] for hits in lists], rrf_k=self.config.rrf_k, weights=self.config.weights
            )
            results.append([Hit(docs[doc_id], score) for doc_id, score in fused[:k]])
        return results

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "hybrid",
            "rrf_k": self.config.rrf_k,
            "weights": list(self.config.weights) if self.config.weights else None,
            "depth": self.config.depth,
            "members": [r.describe() for r in self.retrievers],
            "corpus_hash": self.corpus_hash,
        }
