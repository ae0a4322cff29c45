"""Dense retrieval over FAISS: exact inner product (`flat`), graph search (`hnsw`) and inverted lists
(`ivf`, optionally product-quantized).

`DenseRetriever(corpus)` embeds an in-memory corpus and indexes it, caching the result under `cache_dir`
keyed by the corpus content, the encoder and the index settings. For corpora too large to hold as Python
objects, build the index once with `searchgym index build` (`searchgym.retrieval.index`) and open it with
`DenseRetriever.load(folder)`, which memory-maps it and refuses an index built for another corpus or
encoder.

Memory per passage at dimension d (float32): flat and HNSW keep 4*d bytes (HNSW adds ~8*M bytes of graph
links); IVF-flat keeps 4*d; IVF-PQ keeps `pq_m` bytes. See docs/scaling-retrieval.md for wiki-18 figures.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from searchgym.corpus import Document
from searchgym.errors import ConfigError, IndexMismatchError
from searchgym.retrieval.base import Hit
from searchgym.retrieval.bm25 import default_cache_dir
from searchgym.retrieval.encoders import EncoderConfig, TextEncoder
from searchgym.retrieval.faiss_index import (  # re-exported: their home was this module
    DenseIndexConfig,
    IndexKind,
    build_faiss_index,
    configure_search,
    import_faiss,
    index_nbytes,
    passage_text,
)
from searchgym.retrieval.index import build_index, load_index_parts
from searchgym.retrieval.integrity import VerifyMode

logger = logging.getLogger(__name__)

__all__ = ["DenseIndexConfig", "DenseRetriever", "IndexKind", "build_faiss_index", "configure_search", "import_faiss", "index_nbytes",
           "passage_text"]


class DenseRetriever:
    """Embeds queries and searches a FAISS index over the corpus passages.

    Passages are embedded as `title\\ntext` (the title carries the entity name, as in BM25).
    """

    def __init__(
        self,
        corpus: Sequence[Document],
        *,
        encoder: TextEncoder | EncoderConfig | None = None,
        index: DenseIndexConfig | None = None,
        cache_dir: str | Path | None | Literal[False] = None,
    ):
        """
        Args:
            corpus: a `Corpus` (or any sequence of documents with a `content_hash`).
            encoder: the text encoder; defaults to all-MiniLM-L6-v2 in bf16.
            index: the FAISS index settings; defaults to exact (`flat`) search.
            cache_dir: the built index is saved under `cache_dir/dense/<key>` and reused when the corpus,
                encoder and index settings are unchanged; None means `~/.cache/searchgym`, False disables.
        """
        if len(corpus) == 0:
            raise ConfigError("cannot build a dense index over an empty corpus")
        encoder = encoder if isinstance(encoder, TextEncoder) else TextEncoder(encoder)
        config = index or DenseIndexConfig()
        corpus_hash = _corpus_hash(corpus)
        if cache_dir is False:
            vectors = encoder.encode_passages([passage_text(d) for d in corpus])
            self._attach(corpus, build_faiss_index(vectors, config), encoder, config, corpus_hash)
            return
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        key = {"corpus_hash": corpus_hash, "encoder": encoder.describe(), "index": config.describe()}
        folder = root / "dense" / hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
        if not (folder / "manifest.json").is_file():
            build_index(corpus, folder, encoder=encoder, index=config, store_docs=False, overwrite=True)
        parts = load_index_parts(folder, corpus=corpus, encoder=encoder)
        self._attach(corpus, parts.index, encoder, config, corpus_hash)

    @classmethod
    def load(
        cls,
        folder: str | Path,
        *,
        corpus: Sequence[Document] | None = None,
        corpus_path: str | Path | None = None,
        encoder: TextEncoder | EncoderConfig | None = None,
        mmap: bool = True,
        verify: VerifyMode = "fast",
        allow_encoders: Collection[str] = (),
    ) -> DenseRetriever:
        """Open an index built by `searchgym index build` (see `searchgym.retrieval.index.load_index_parts`
        for the checks: a damaged file raises `IndexIntegrityError`, a different corpus or encoder
        `IndexMismatchError`; an encoder the manifest names that is neither the packaged default nor in
        `allow_encoders` is refused with `ConfigError`)."""
        parts = load_index_parts(folder, corpus=corpus, corpus_path=corpus_path, encoder=encoder, mmap=mmap,
                                 verify=verify, allow_encoders=allow_encoders)
        self = cls.__new__(cls)
        self._attach(parts.documents, parts.index, parts.encoder, parts.index_config, parts.manifest.corpus_hash)
        return self

    def _attach(
        self, docs: Sequence[Document], index, encoder: TextEncoder, config: DenseIndexConfig, corpus_hash: str
    ) -> None:
        if index.ntotal != len(docs):
            raise IndexMismatchError(f"the index holds {index.ntotal} vectors but the corpus has {len(docs)} documents")
        self.corpus, self.index, self.encoder, self.index_config = docs, index, encoder, config
        self.corpus_hash = corpus_hash

    # -- Retriever protocol -----------------------------------------------------------------------------

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if k <= 0 or not queries:
            return [[] for _ in queries]
        vectors = self.encoder.encode_queries(list(queries))
        return self.search_vectors(vectors, k)

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        """Search with query embeddings already computed, shape (n, dim)."""
        k = min(k, len(self.corpus))
        configure_search(self.index, self.index_config, k)
        scores, ids = self.index.search(np.ascontiguousarray(vectors, dtype=np.float32), k)
        # FAISS pads with id -1 when an approximate index finds fewer than k neighbours.
        return [
            [Hit(self.corpus[int(i)], float(s)) for s, i in zip(row_s, row_i) if i >= 0]
            for row_s, row_i in zip(scores, ids)
        ]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "dense",
            "encoder": self.encoder.describe(),
            "index": self.index_config.describe(),
            "corpus_hash": self.corpus_hash,
        }


def _corpus_hash(corpus: Sequence[Document]) -> str:
    h = getattr(corpus, "content_hash", None)
    if not isinstance(h, str):
        raise ConfigError(
            f"the corpus must be a searchgym Corpus (or have a content_hash); got {type(corpus).__name__}"
        )
    return h
