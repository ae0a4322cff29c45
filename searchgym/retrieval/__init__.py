"""Retrievers: map a batch of queries to ranked documents.

Every retriever satisfies the small `Retriever` protocol (`search(queries, k)`, batched), so the
environment, the ranker and the benchmarks never care which backend answers: BM25 (`bm25`), dense FAISS
(`dense`), their reciprocal-rank fusion (`hybrid`), a Search-R1-compatible server (`http`), and a
record/replay cache around any of them. The server itself is `searchgym.retrieval.server` (needs the
`server` extra). Heavy dependencies (faiss, torch, httpx) are imported only when used.
"""

from searchgym.retrieval.base import Hit, Retriever, resolve_retriever
from searchgym.retrieval.bm25 import BM25Retriever
from searchgym.retrieval.cache import CachedRetriever, RetrievalCache
from searchgym.retrieval.dense import DenseIndexConfig, DenseRetriever
from searchgym.retrieval.encoders import EncoderConfig, TextEncoder
from searchgym.retrieval.http import HTTPRetriever, HTTPRetrieverConfig
from searchgym.retrieval.hybrid import HybridConfig, HybridRetriever, reciprocal_rank_fusion
from searchgym.retrieval.tokenize import Tokenizer

__all__ = [
    "BM25Retriever",
    "CachedRetriever",
    "DenseIndexConfig",
    "DenseRetriever",
    "EncoderConfig",
    "HTTPRetriever",
    "HTTPRetrieverConfig",
    "Hit",
    "HybridConfig",
    "HybridRetriever",
    "RetrievalCache",
    "Retriever",
    "TextEncoder",
    "Tokenizer",
    "reciprocal_rank_fusion",
    "resolve_retriever",
]
