"""Retrievers: map a batch of queries to ranked documents.

Every retriever satisfies the small `Retriever` protocol (`search(queries, k)`, batched), so the
environment, the ranker and the benchmarks never care which backend answers.
"""

from searchgym.retrieval.base import Hit, Retriever, resolve_retriever
from searchgym.retrieval.bm25 import BM25Retriever
from searchgym.retrieval.tokenize import Tokenizer

__all__ = ["BM25Retriever", "Hit", "Retriever", "Tokenizer", "resolve_retriever"]
