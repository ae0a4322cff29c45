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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from searchgym.corpus import Document
from searchgym.errors import ConfigError
from searchgym.retrieval.base import Hit
from searchgym.retrieval.encoders import EncoderConfig, TextEncoder
from searchgym.retrieval.integrity import VerifyMode

logger = logging.getLogger(__name__)


IndexKind = Literal["flat", "hnsw", "ivf"]
"""FAISS index types (`DenseIndexConfig.kind`)."""

@dataclass(frozen=True)
class DenseIndexConfig:
    """Which FAISS index to build and how to search it. Every index ranks by inner product."""

    kind: IndexKind = "flat"
    """`flat`: exact search; `hnsw`: approximate graph search, fast and memory-hungry; `ivf`: inverted
    lists over k-means cells, optionally product-quantized (`pq_m`) to fit 21M passages in a few GB."""
    hnsw_m: int = 32
    """HNSW: graph neighbours per node (more: better recall, more memory)."""
    ef_construction: int = 200
    """HNSW: candidate list size while building."""
    ef_search: int = 128
    """HNSW: candidate list size while searching (raised to k when k is larger)."""
    ivf_nlist: int | None = None
    """IVF: number of cells; None picks ~4*sqrt(n), clamped to the training sample."""
    nprobe: int = 16
    """IVF: cells visited per query."""
    pq_m: int = 0
    """IVF: bytes per vector for product quantization (must divide the dimension); 0 stores full vectors."""
    train_size: int = 100_000
    """IVF: vectors sampled to train the k-means quantizer (and PQ codebooks)."""

    def __post_init__(self) -> None:
        if self.kind not in get_args(IndexKind):
            raise ConfigError(f"DenseIndexConfig.kind must be 'flat', 'hnsw' or 'ivf', got {self.kind!r}")
        for name in ("hnsw_m", "ef_construction", "ef_search", "nprobe", "train_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"DenseIndexConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.ivf_nlist is not None and self.ivf_nlist < 1:
            raise ConfigError(f"DenseIndexConfig.ivf_nlist must be >= 1 or None, got {self.ivf_nlist}")
        if self.pq_m < 0:
            raise ConfigError(f"DenseIndexConfig.pq_m must be >= 0, got {self.pq_m}")
        if self.pq_m and self.kind != "ivf":
            raise ConfigError("DenseIndexConfig.pq_m applies to kind='ivf' only")

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def import_faiss():
    try:
        import faiss
    except ImportError as e:
        raise ConfigError("dense retrieval needs faiss: pip install 'searchgym[dense]' (faiss-cpu)") from e
    return faiss


def build_faiss_index(vectors: np.ndarray, config: DenseIndexConfig, *, chunk: int = 65_536, seed: int = 0):
    """A FAISS inner-product index over the rows of `vectors` (n, d), added in chunks so that a
    memory-mapped array is never copied whole."""
    faiss = import_faiss()
    n, d = vectors.shape
    if n == 0:
        raise ConfigError("cannot build a dense index over zero vectors")
    ip = faiss.METRIC_INNER_PRODUCT
    if config.kind == "flat":
        index = faiss.IndexFlatIP(d)
    elif config.kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, config.hnsw_m, ip)
        index.hnsw.efConstruction = config.ef_construction
    else:
        if config.pq_m and d % config.pq_m:
            raise ConfigError(f"pq_m={config.pq_m} must divide the embedding dimension {d}")
        sample = _training_sample(vectors, config.train_size, seed)
        nlist = config.ivf_nlist or max(1, int(4 * np.sqrt(n)))
        nlist = min(nlist, len(sample))  # k-means needs at least one training point per cell
        quantizer = faiss.IndexFlatIP(d)
        if config.pq_m:
            index = faiss.IndexIVFPQ(quantizer, d, nlist, config.pq_m, 8, ip)
        else:
            index = faiss.IndexIVFFlat(quantizer, d, nlist, ip)
        index.train(sample)
    for start in range(0, n, chunk):
        index.add(np.ascontiguousarray(vectors[start : start + chunk], dtype=np.float32))
    configure_search(index, config)
    return index


def configure_search(index, config: DenseIndexConfig, k: int = 0) -> None:
    """Apply the search-time parameters (lost when an index is written and read back)."""
    faiss = import_faiss()
    if config.kind == "hnsw":
        faiss.downcast_index(index).hnsw.efSearch = max(config.ef_search, k)
    elif config.kind == "ivf":
        faiss.extract_index_ivf(index).nprobe = config.nprobe


def _training_sample(vectors: np.ndarray, size: int, seed: int) -> np.ndarray:
    n = len(vectors)
    if n <= size:
        return np.ascontiguousarray(vectors, dtype=np.float32)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def index_nbytes(index) -> int:
    """Bytes the index holds (vectors, codes, graph links), as FAISS serializes it."""
    return int(import_faiss().serialize_index(index).nbytes)


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
        from searchgym.retrieval.bm25 import default_cache_dir
        from searchgym.retrieval.index import build_index, load_index_parts

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
        from searchgym.retrieval.index import load_index_parts

        parts = load_index_parts(folder, corpus=corpus, corpus_path=corpus_path, encoder=encoder, mmap=mmap,
                                 verify=verify, allow_encoders=allow_encoders)
        self = cls.__new__(cls)
        self._attach(parts.documents, parts.index, parts.encoder, parts.index_config, parts.manifest.corpus_hash)
        return self

    def _attach(
        self, docs: Sequence[Document], index, encoder: TextEncoder, config: DenseIndexConfig, corpus_hash: str
    ) -> None:
        if index.ntotal != len(docs):
            raise ConfigError(f"the index holds {index.ntotal} vectors but the corpus has {len(docs)} documents")
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


def passage_text(doc: Document) -> str:
    """What a passage is embedded as."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _corpus_hash(corpus: Sequence[Document]) -> str:
    h = getattr(corpus, "content_hash", None)
    if not isinstance(h, str):
        raise ConfigError(
            f"the corpus must be a searchgym Corpus (or have a content_hash); got {type(corpus).__name__}"
        )
    return h
