"""In-process BM25 with two interchangeable backends.

- `bm25s` (default): scores are precomputed into a sparse matrix at index time, and retrieval is a sparse
  row sum plus top-k selection, compiled with numba. The index is saved once per corpus under
  `cache_dir/bm25s/<key>/` (numpy arrays and JSON, loaded memory-mapped, never pickled) where the key
  hashes the corpus content, the tokenizer and the BM25 parameters, so a changed corpus never reuses a
  stale index.
- `rank_bm25`: the widely used pure-Python implementation (BM25Okapi), scoring every document per query.
  Kept as the reference that the benchmark compares against; it is not cached.

Both backends use the same `Tokenizer`, so they rank the same way up to their idf formulas.

bm25s compiles its numba kernels on the first search of every new process (~9 s on one core here, 10-21 s
on a busy machine): every server start and every retriever-process restart paid it. Its kernels are
therefore cached on disk (numba's own cache: `__pycache__` beside bm25s, or numba's user cache folder
when that is read-only; `NUMBA_CACHE_DIR` moves it), so only the first process on a machine compiles; a
later one loads them in well under a second. numba keys the cache by source file and CPU, so a changed
bm25s or another machine compiles again rather than load a stale kernel.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from searchgym.corpus import Corpus
from searchgym.errors import ConfigError
from searchgym.retrieval.base import Hit
from searchgym.retrieval.tokenize import Tokenizer

logger = logging.getLogger(__name__)

BM25Backend = Literal["bm25s", "rank_bm25"]
"""`bm25s` (fast, cached) or `rank_bm25` (the reference implementation)."""

INDEX_FORMAT_VERSION = 1


_kernels_cached = False


def cache_numba_kernels() -> None:
    """Turn on numba's on-disk cache for bm25s's kernels (once per process; before their first call)."""
    global _kernels_cached
    if _kernels_cached:
        return
    _kernels_cached = True
    try:
        from numba.core.dispatcher import Dispatcher

        import bm25s.numba.retrieve_utils
        import bm25s.numba.selection
    except ImportError:  # numba missing: bm25s falls back to numpy, nothing to cache
        return
    count = 0
    for module in (bm25s.numba.retrieve_utils, bm25s.numba.selection):
        for name, kernel in vars(module).items():
            if isinstance(kernel, Dispatcher):
                try:
                    kernel.enable_caching()
                    count += 1
                except Exception as e:  # noqa: BLE001 - no cache only costs the compile time
                    logger.debug("numba cache not available for bm25s kernel %s: %s", name, e)
    logger.debug("numba on-disk cache enabled for %d bm25s kernels", count)


def default_cache_dir() -> Path:
    """Where indexes are cached when no `cache_dir` is given: `~/.cache/searchgym`."""
    return Path.home() / ".cache" / "searchgym"


class BM25Retriever:
    """BM25 over an in-memory `Corpus`.

    >>> from searchgym.corpus import Corpus, Document
    >>> corpus = Corpus([Document("a", "Paris", "Paris is the capital of France."),
    ...                  Document("b", "Rome", "Rome is the capital of Italy.")])
    >>> BM25Retriever(corpus, cache_dir=False).search(["capital of Italy"], k=1)[0][0].doc.id
    'b'
    """

    def __init__(
        self,
        corpus: Corpus,
        *,
        backend: BM25Backend = "bm25s",
        k1: float = 0.9,
        b: float = 0.4,
        method: Literal["lucene", "robertson", "atire"] = "lucene",
        tokenizer: Tokenizer | None = None,
        cache_dir: str | Path | None | Literal[False] = None,
    ):
        """
        Args:
            corpus: the documents to index.
            backend: `bm25s` (fast, cached) or `rank_bm25` (reference implementation).
            k1, b: BM25 parameters; the defaults are Pyserini's, which Search-R1's BM25 baseline uses.
            method: bm25s's idf/tf variant; `robertson` matches rank-bm25's BM25Okapi most closely.
            tokenizer: defaults to `Tokenizer()` (stopwords removed, Snowball stemming).
            cache_dir: folder for the persisted bm25s index; None means `~/.cache/searchgym`, False
                disables caching.
        """
        if backend not in get_args(BM25Backend):
            raise ConfigError(f"unknown BM25 backend {backend!r}; choose 'bm25s' or 'rank_bm25'")
        if len(corpus) == 0:
            raise ConfigError("cannot build a BM25 index over an empty corpus")
        self.corpus = corpus
        self.backend = backend
        self.k1, self.b, self.method = k1, b, method
        self.tokenizer = tokenizer or Tokenizer()
        self._cache_root = None if cache_dir is False else Path(cache_dir) if cache_dir is not None else default_cache_dir()
        if backend == "bm25s":
            self._bm25s = self._load_or_build_bm25s()
            self._vocab: dict[str, int] = self._bm25s.vocab_dict
        else:
            from rank_bm25 import BM25Okapi

            self._okapi = BM25Okapi(self.tokenizer.batch(_index_texts(corpus)), k1=k1, b=b)

    # -- public API --------------------------------------------------------------------------------

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if k <= 0:
            return [[] for _ in queries]
        k = min(k, len(self.corpus))
        tokenized = self.tokenizer.batch(queries)
        if self.backend == "bm25s":
            return self._search_bm25s(tokenized, k)
        return [self._search_okapi(q, k) for q in tokenized]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "bm25",
            "backend": self.backend,
            "k1": self.k1,
            "b": self.b,
            "method": self.method if self.backend == "bm25s" else "okapi",
            "tokenizer": self.tokenizer.describe(),
            "corpus_hash": self.corpus.content_hash,
        }

    # -- bm25s --------------------------------------------------------------------------------------

    def _index_key(self) -> str:
        spec = {"v": INDEX_FORMAT_VERSION, **self.describe()}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:24]

    def _new_bm25s(self):
        import bm25s

        return bm25s.BM25(k1=self.k1, b=self.b, method=self.method, backend="numba")

    def _load_or_build_bm25s(self):
        import bm25s

        cache_numba_kernels()
        cache = None if self._cache_root is None else self._cache_root / "bm25s" / self._index_key()
        if cache is not None and (cache / "params.index.json").is_file():
            try:
                model = bm25s.BM25.load(str(cache), mmap=True, show_progress=False, verbosity=0)
                model.backend = "numba"
                logger.debug("loaded BM25 index from %s", cache)
                return model
            except (OSError, ValueError, json.JSONDecodeError) as e:
                logger.warning("BM25 index cache at %s is unreadable (%s); rebuilding it", cache, e)
        model = self._new_bm25s()
        model.index(self.tokenizer.batch(_index_texts(self.corpus)), show_progress=False)
        if cache is not None:
            _save_atomically(model, cache)
        return model

    def _search_bm25s(self, tokenized: list[list[str]], k: int) -> list[list[Hit]]:
        vocab = self._vocab
        ids = [[vocab[t] for t in q if t in vocab] for q in tokenized]
        results: list[list[Hit]] = [[] for _ in tokenized]
        live = [i for i, q in enumerate(ids) if q]
        if not live:
            return results
        docs, scores = self._bm25s.retrieve([ids[i] for i in live], k=k, show_progress=False, n_threads=1)
        documents = self.corpus.documents
        for row, i in enumerate(live):
            results[i] = [Hit(documents[d], s) for d, s in zip(docs[row].tolist(), scores[row].tolist()) if s > 0]
        return results

    # -- rank_bm25 -------------------------------------------------------------------------------------

    def _search_okapi(self, query: list[str], k: int) -> list[Hit]:
        if not query:
            return []
        scores = self._okapi.get_scores(query)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        # Okapi's idf floor can make a non-matching document score 0; matched ones are > 0.
        documents = self.corpus.documents
        return [Hit(documents[d], float(scores[d])) for d in top.tolist() if scores[d] > 0]


def _index_texts(corpus: Corpus) -> list[str]:
    # The title is part of what is searched: entity names often appear only there.
    return [f"{d.title}\n{d.text}" for d in corpus]


def _save_atomically(model, target: Path) -> None:
    """Save into a temporary sibling folder, then rename, so a crash never leaves a half-written index."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        model.save(str(tmp), show_progress=False)
        try:
            os.replace(tmp, target)
        except OSError:
            # Another process saved the same index first; theirs is equivalent.
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        logger.warning("could not cache the BM25 index at %s: %s", target, e)
