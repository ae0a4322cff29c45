"""What dense retrieval and persisted indexes share: the FAISS index settings (`DenseIndexConfig`), building
and configuring a FAISS index, and the text a passage is embedded as.

`searchgym.retrieval.dense` (the retriever) and `searchgym.retrieval.index` (index folders) both import from
here, and `dense` imports `index`: the dependency runs one way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

import numpy as np

from searchgym.corpus import Document
from searchgym.errors import ConfigError

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


def passage_text(doc: Document) -> str:
    """What a passage is embedded as."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text
