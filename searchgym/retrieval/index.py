"""Persisted dense indexes: build by streaming a corpus, reload memory-mapped, refuse when stale.

An index folder holds:

- `manifest.json`: format version, corpus hash (the same SHA-256 as `Corpus.content_hash`), document
  count, encoder settings, index settings, each file's size and SHA-256, and build timings;
- `embeddings.npy`: float32 passage embeddings (n, d), written chunk by chunk while encoding, so a
  21M-passage corpus is never held in memory; reloaded with `mmap_mode="r"`;
- `index.faiss`: the FAISS index (flat and HNSW vectors are memory-mapped on reload);
- `docs.jsonl` + `docs.offsets.npy` (unless `store_docs=False`): the documents, for serving without the
  corpus file (`searchgym.retrieval.docstore`).

The folder is written under a temporary name and renamed when complete, and the manifest is written
last: a crashed build never leaves a folder that loads. `load_index_parts` raises `IndexMismatchError`
when the corpus or encoder given differs from the manifest's, and `IndexIntegrityError` (naming the file)
when a file's size or SHA-256 differs from the manifest's, before FAISS or numpy reads it
(`searchgym.retrieval.integrity`). The encoder a manifest names is loaded only when it is the packaged
default or the caller allowed it (`allow_encoders`, `--allow-encoder`): a manifest is data and must not
choose which model folder or hub id the process loads.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.corpus import Document, iter_corpus_file, load_corpus
from searchgym.errors import ConfigError, DataError, DataNotFoundError, IndexMismatchError
from searchgym.retrieval.docstore import DOCS_FILE, OFFSETS_FILE, DocStore, DocStoreWriter
from searchgym.retrieval.encoders import DEFAULT_ENCODER, EncoderConfig, TextEncoder
from searchgym.retrieval.faiss_index import DenseIndexConfig, build_faiss_index, configure_search, import_faiss, passage_text
from searchgym.retrieval.integrity import VerifyMode, file_record, verify_files
from searchgym.corpus.corpus import ContentHasher
from searchgym.retrieval.storage import NpyRowWriter, Staging, chunks, file_stamp, link_or_copy

logger = logging.getLogger(__name__)

FORMAT_VERSION = 2
"""2: `files` records each file's size and SHA-256 (1: sizes only, still read, checked by size)."""
READABLE_VERSIONS = (1, 2)
MANIFEST_FILE = "manifest.json"
EMBEDDINGS_FILE = "embeddings.npy"
INDEX_FILE = "index.faiss"


@dataclass
class IndexManifest:
    """What an index folder was built from; compared on every load."""

    corpus_hash: str
    """SHA-256 over every document's id, title and text in order (`Corpus.content_hash`)."""
    num_docs: int
    dim: int
    encoder: dict[str, Any]
    """The `EncoderConfig` fields, so the index reloads with the encoder it was built with."""
    encoder_identity: dict[str, Any]
    """`TextEncoder.describe()`: what must match for query embeddings to be comparable."""
    index: dict[str, Any]
    """The `DenseIndexConfig` fields."""
    index_type: str
    index_bytes: int
    """Bytes the FAISS index holds in memory when loaded without memory mapping."""
    docs_stored: bool
    files: dict[str, Any] = field(default_factory=dict)
    """File name -> `{"size": bytes, "sha256": hex}` (format 1: file name -> size)."""
    corpus_file: dict[str, Any] | None = None
    """`{"path", "size", "mtime_ns"}` of the corpus file streamed, to skip re-hashing an unchanged file."""
    build_seconds: dict[str, float] = field(default_factory=dict)
    created: str = ""
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def read(cls, folder: str | Path) -> IndexManifest:
        path = Path(folder) / MANIFEST_FILE
        if not path.is_file():
            raise DataNotFoundError(
                f"no {MANIFEST_FILE}: not an index folder, or its build did not finish; build it with `searchgym index build`",
                path=folder,
            )
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            manifest = cls(**raw)
        except (ValueError, TypeError, RecursionError, MemoryError) as e:  # ValueError: not JSON, or not UTF-8
            raise DataError(f"unreadable manifest ({type(e).__name__}: {str(e)[:200]}); rebuild the index", path=path) from None
        if manifest.format_version not in READABLE_VERSIONS:
            raise IndexMismatchError(
                f"{path}: index format {manifest.format_version!r}, this searchgym reads {READABLE_VERSIONS}; rebuild the index"
            )
        problem = manifest._problem()
        if problem:
            raise DataError(f"malformed manifest: {problem}; rebuild the index", path=path)
        return manifest

    def _problem(self) -> str | None:
        """What is wrong with the field types, or None: a manifest is read from disk and may be damaged."""
        for name in ("num_docs", "dim", "index_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < (1 if name != "index_bytes" else 0):
                return f"{name} must be a positive integer, got {value!r}"
        for name in ("encoder", "encoder_identity", "index", "files", "build_seconds"):
            if not isinstance(getattr(self, name), dict):
                return f"{name} must be an object, got {type(getattr(self, name)).__name__}"
        for name in ("corpus_hash", "index_type"):
            if not isinstance(getattr(self, name), str):
                return f"{name} must be a string"
        if not isinstance(self.docs_stored, bool):
            return "docs_stored must be true or false"
        if self.corpus_file is not None and not isinstance(self.corpus_file, dict):
            return "corpus_file must be an object or null"
        for name, record in self.files.items():
            ok = (type(record) is int and self.format_version == 1) or (
                isinstance(record, dict) and type(record.get("size")) is int and isinstance(record.get("sha256"), str)
            )
            if not ok:
                return f"files[{name!r}] must be {{'size': int, 'sha256': str}}, got {record!r}"
        required = {EMBEDDINGS_FILE, INDEX_FILE} | ({DOCS_FILE, OFFSETS_FILE} if self.docs_stored else set())
        if not required <= set(self.files):
            return f"files must list {sorted(required)}, lists {sorted(self.files)}"
        return None


@dataclass
class IndexParts:
    """A loaded, verified index folder."""

    manifest: IndexManifest
    index: Any
    documents: Sequence[Document]
    encoder: TextEncoder
    index_config: DenseIndexConfig
    embeddings: np.ndarray
    """The passage embeddings, memory-mapped."""


# -- building -----------------------------------------------------------------------------------------


def build_index(
    source: str | Path | Iterable[Document],
    out_dir: str | Path,
    *,
    encoder: TextEncoder | EncoderConfig | None = None,
    index: DenseIndexConfig | None = None,
    store_docs: bool = True,
    chunk_size: int = 2048,
    limit: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> IndexManifest:
    """Embed every document of `source` (a corpus file, streamed, or any iterable of documents) and
    write an index folder at `out_dir`. `progress(n)` is called with the number of documents embedded
    so far. `limit` keeps only the first documents (for trials)."""
    encoder = encoder if isinstance(encoder, TextEncoder) else TextEncoder(encoder)
    config = index or DenseIndexConfig()
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be >= 1, got {chunk_size}")
    out = _check_target(out_dir, overwrite)
    is_file = isinstance(source, (str, Path))
    # A truncated build must not vouch for the whole file, so its stamp is only kept without a limit.
    corpus_file = file_stamp(source) if is_file and limit is None else None
    docs: Iterable[Document] = iter_corpus_file(source) if is_file else source  # type: ignore[arg-type]
    if limit is not None:
        docs = islice(docs, limit)
    with Staging(out, MANIFEST_FILE) as tmp:
        started = time.perf_counter()
        hasher, n = ContentHasher(), 0
        writer = NpyRowWriter(tmp / EMBEDDINGS_FILE, encoder.dim)
        store = DocStoreWriter(tmp) if store_docs else None
        try:
            for chunk in chunks(docs, chunk_size):
                for doc in chunk:
                    hasher.update(doc)
                    if store is not None:
                        store.add(doc)
                writer.write(encoder.encode_passages([passage_text(d) for d in chunk]))
                n += len(chunk)
                if progress is not None:
                    progress(n)
        finally:
            writer.close()
            if store is not None:
                store.close()
        if n == 0:
            raise DataError("the corpus holds no documents", path=source if is_file else None)  # type: ignore[arg-type]
        encode_s = time.perf_counter() - started
        manifest = IndexManifest(
            corpus_hash=hasher.hexdigest(),
            num_docs=n,
            dim=encoder.dim,
            encoder=encoder.config_dict(),
            encoder_identity=encoder.describe(),
            index=config.describe(),
            index_type=config.kind,
            index_bytes=0,
            docs_stored=store_docs,
            corpus_file=corpus_file,
            build_seconds={"encode": round(encode_s, 3)},
        )
        _write_faiss(tmp, manifest, config)
    logger.info("built %s index over %d documents at %s", config.kind, n, out)
    return manifest


def rebuild_index(
    source_dir: str | Path, out_dir: str | Path, *, index: DenseIndexConfig, overwrite: bool = False
) -> IndexManifest:
    """A new index type over an existing folder's embeddings and documents, without re-encoding."""
    src = Path(source_dir)
    old = IndexManifest.read(src)
    out = _check_target(out_dir, overwrite)
    with Staging(out, MANIFEST_FILE) as tmp:
        names = [EMBEDDINGS_FILE] + ([DOCS_FILE, OFFSETS_FILE] if old.docs_stored else [])
        for name in names:
            link_or_copy(src / name, tmp / name)
        manifest = IndexManifest(
            **{
                **asdict(old),
                "index": index.describe(),
                "index_type": index.kind,
                "index_bytes": 0,
                "files": {},
                "build_seconds": {"encode": old.build_seconds.get("encode", 0.0)},
            }
        )
        _write_faiss(tmp, manifest, index)
    return manifest


def _write_faiss(tmp: Path, manifest: IndexManifest, config: DenseIndexConfig) -> None:
    faiss = import_faiss()
    vectors = np.load(tmp / EMBEDDINGS_FILE, mmap_mode="r")
    started = time.perf_counter()
    built = build_faiss_index(vectors, config)
    manifest.build_seconds["index"] = round(time.perf_counter() - started, 3)
    faiss.write_index(built, str(tmp / INDEX_FILE))
    manifest.index_bytes = os.path.getsize(tmp / INDEX_FILE)
    manifest.files = {p.name: file_record(p) for p in sorted(tmp.iterdir()) if not p.name.startswith(".")}
    manifest.created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    (tmp / MANIFEST_FILE).write_text(manifest.to_json(), encoding="utf-8")


def _check_target(out_dir: str | Path, overwrite: bool) -> Path:
    out = Path(out_dir)
    if out.exists() and not overwrite and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not empty; choose another folder or pass overwrite=True (--overwrite)")
    return out


# -- loading ------------------------------------------------------------------------------------------


def load_index_parts(
    folder: str | Path,
    *,
    corpus: Sequence[Document] | None = None,
    corpus_path: str | Path | None = None,
    encoder: TextEncoder | EncoderConfig | None = None,
    mmap: bool = True,
    verify: VerifyMode = "fast",
    allow_encoders: Collection[str] = (),
) -> IndexParts:
    """Open and verify an index folder.

    The documents come from `corpus` (an in-memory `Corpus`), else `corpus_path` (hashed only when its
    size or modification time differ from the build's), else the folder's own document store. Raises
    `IndexIntegrityError` (naming the file) when a file's size or SHA-256 differs from the manifest's
    (`verify`: see `searchgym.retrieval.integrity`), and `IndexMismatchError` when the corpus hash or the
    encoder disagree with it. Without `encoder`, the manifest's encoder is loaded only when it is the
    packaged default or listed in `allow_encoders` (model folders or hub ids the caller trusts).
    """
    folder = Path(folder)
    manifest = IndexManifest.read(folder)
    if manifest.format_version == 1 and verify != "size":
        logger.warning("index at %s records no file hashes (format 1): files are checked by size only; rebuild it to "
                       "record them", folder)
    verify_files(folder, manifest.files, mode=verify)
    documents = _verified_documents(folder, manifest, corpus, corpus_path)
    enc = _verified_encoder(manifest, encoder, folder, allow_encoders)
    try:
        config = DenseIndexConfig(**manifest.index)
    except (TypeError, ConfigError) as e:
        raise DataError(f"malformed index settings in the manifest ({e}); rebuild the index", path=folder / MANIFEST_FILE) from None
    index = _read_faiss(folder / INDEX_FILE, config, mmap)
    try:
        embeddings = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, MemoryError) as e:
        raise DataError(f"unreadable ({type(e).__name__}: {e}); rebuild the index", path=folder / EMBEDDINGS_FILE) from None
    expected = (manifest.num_docs, manifest.dim)
    if index.ntotal != manifest.num_docs or embeddings.shape != expected or len(documents) != manifest.num_docs:
        raise IndexMismatchError(
            f"index at {folder} is inconsistent: {MANIFEST_FILE} says {expected}, index holds {index.ntotal} vectors, embeddings "
            f"{embeddings.shape}, documents {len(documents)}; rebuild it with `searchgym index build`"
        )
    return IndexParts(manifest, index, documents, enc, config, embeddings)


def _verified_documents(folder: Path, manifest: IndexManifest, corpus, corpus_path) -> Sequence[Document]:
    if corpus is not None:
        got = getattr(corpus, "content_hash", None)
        _check_hash(folder, manifest, got, f"the given corpus ({len(corpus)} documents)")
        return corpus
    if corpus_path is not None:
        stamp = file_stamp(corpus_path)
        old = manifest.corpus_file or {}
        unchanged = (
            stamp["path"] == old.get("path")
            and stamp["size"] == old.get("size")
            and stamp["mtime_ns"] == old.get("mtime_ns")
        )
        if manifest.docs_stored:
            if not unchanged:
                hasher = ContentHasher()
                for doc in iter_corpus_file(corpus_path):
                    hasher.update(doc)
                _check_hash(folder, manifest, hasher.hexdigest(), f"corpus file {corpus_path}")
            return DocStore(folder, content_hash=manifest.corpus_hash)
        loaded = load_corpus(corpus_path)
        _check_hash(folder, manifest, loaded.content_hash, f"corpus file {corpus_path}")
        return loaded
    if not manifest.docs_stored:
        raise ConfigError(
            f"index at {folder} was built without its documents (store_docs=False): pass corpus= or corpus_path="
        )
    return DocStore(folder, content_hash=manifest.corpus_hash)


def _check_hash(folder: Path, manifest: IndexManifest, got: str | None, what: str) -> None:
    if got != manifest.corpus_hash:
        raise IndexMismatchError(
            f"index at {folder} was built for a different corpus ({manifest.num_docs} documents, hash {manifest.corpus_hash[:12]}) "
            f"than {what} (hash {str(got)[:12]}); rebuild it with `searchgym index build` or pass the corpus it was built from"
        )


def _verified_encoder(manifest: IndexManifest, encoder, folder: Path, allowed: Collection[str]) -> TextEncoder:
    if isinstance(allowed, str):
        raise ConfigError("allow_encoders must be a collection of model names, not one string")
    if encoder is None:
        model = manifest.encoder.get("model")
        if model != DEFAULT_ENCODER and model not in allowed:
            raise ConfigError(
                f"{folder / MANIFEST_FILE} names encoder {model!r}, which is not allowed: an index's manifest may not choose "
                f"which model folder or hub id is loaded. If you trust it, allow it (allow_encoders=[{model!r}], "
                f"--allow-encoder {model}) or pass the encoder yourself (encoder=...)"
            )
        try:
            # Queries are encoded on the CPU unless an encoder says otherwise: the build may have used a GPU
            # this machine does not have; the dtype is this machine's choice (it changes only rounding).
            return TextEncoder(EncoderConfig(**{**manifest.encoder, "device": "cpu", "dtype": "auto"}))
        except TypeError as e:
            raise DataError(f"manifest encoder settings are unreadable ({e}); rebuild the index", path=folder) from e
    enc = encoder if isinstance(encoder, TextEncoder) else TextEncoder(encoder)
    if enc.describe() != manifest.encoder_identity:
        raise IndexMismatchError(
            f"index at {folder} was built with encoder {manifest.encoder_identity}, not {enc.describe()}: queries would be "
            "embedded into another space. Omit encoder= to use the index's own, or rebuild the index"
        )
    return enc


def _read_faiss(path: Path, config: DenseIndexConfig, mmap: bool):
    faiss = import_faiss()
    if not path.is_file():
        raise DataNotFoundError(f"no {INDEX_FILE} in the index folder; rebuild it", path=path.parent)
    flags = faiss.IO_FLAG_MMAP_IFC if mmap and config.kind in ("flat", "hnsw") else 0
    try:
        index = faiss.read_index(str(path), flags)
    except MemoryError:
        raise DataError("FAISS index asks for more memory than there is (damaged?); rebuild it", path=path) from None
    except RuntimeError as e:
        if not flags:
            raise DataError(f"unreadable FAISS index ({e}); rebuild it", path=path) from e
        logger.debug("memory-mapped read of %s failed (%s); reading it into memory", path, e)
        try:
            index = faiss.read_index(str(path))
        except (RuntimeError, MemoryError) as e2:
            raise DataError(f"unreadable FAISS index ({type(e2).__name__}: {e2}); rebuild it", path=path) from None
    kinds = {"flat": "IndexFlat", "hnsw": "IndexHNSW", "ivf": "IndexIVF"}
    if not type(faiss.downcast_index(index)).__name__.startswith(kinds[config.kind]):
        raise DataError(f"holds a {type(index).__name__}, the manifest says {config.kind}; rebuild it", path=path)
    configure_search(index, config)
    return index
