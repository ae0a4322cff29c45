"""Record/replay retrieval cache: exactly repeatable evaluation and tests without the index.

`CachedRetriever(retriever, "run.jsonl", mode="record")` answers from the cache when it can and
otherwise asks `retriever` and records the answer; `CachedRetriever(None, "run.jsonl", mode="replay")`
answers from the cache alone, and a query that was never recorded raises `CacheMissError`.

Entries are keyed by SHA-256 over (corpus hash, retriever description, query, k), so results recorded
with one corpus or retriever configuration are never served for another. The hits are stored whole
(id, title, text, score), which is what lets replay run without the corpus. Two storage formats, chosen
by the file suffix: JSONL (`.jsonl`, append-only, human-readable; loaded into memory on open) and SQLite
(`.sqlite`/`.db`, for large caches, looked up on disk). Plain JSON in both: nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from searchgym.corpus import Document
from searchgym.errors import CacheMissError, ConfigError, DataError
from searchgym.retrieval.base import Hit, Retriever

logger = logging.getLogger(__name__)

CacheMode = Literal["record", "replay"]
"""`record`: serve hits, retrieve and store misses; `replay`: serve hits, raise `CacheMissError` on a miss."""


def fingerprint(description: dict[str, Any]) -> str:
    """SHA-256 of a retriever description in canonical JSON."""
    return hashlib.sha256(json.dumps(description, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def cache_key(description: dict[str, Any], query: str, k: int) -> str:
    """The key of one (retriever, query, k) entry; the corpus hash is part of the description and also
    keyed explicitly, so a retriever that forgot to describe its corpus still cannot collide."""
    spec = {
        "corpus_hash": description.get("corpus_hash"),
        "retriever": fingerprint(description),
        "query": query,
        "k": k,
    }
    return hashlib.sha256(
        json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    ).hexdigest()


def _hits_to_json(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"id": h.doc.id, "title": h.doc.title, "text": h.doc.text, "score": h.score} for h in hits]
    for row, h in zip(rows, hits, strict=True):
        if not h.doc.title_quoted:
            row["title_quoted"] = False
    return rows


def _hits_from_json(rows: list[dict[str, Any]]) -> list[Hit]:
    return [Hit(Document(r["id"], r["title"], r["text"], r.get("title_quoted", True)), float(r["score"])) for r in rows]


class RetrievalCache:
    """The storage: entries (key -> hits) and the retriever descriptions they were recorded with."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in (".jsonl", ".sqlite", ".db"):
            raise ConfigError(f"retrieval cache {self.path}: use a .jsonl or .sqlite/.db file")
        self.kind: Literal["jsonl", "sqlite"] = "jsonl" if suffix == ".jsonl" else "sqlite"
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._descriptions: dict[str, dict[str, Any]] = {}
        if self.kind == "jsonl":
            self._entries: dict[str, list[dict[str, Any]]] = {}
            self._load_jsonl()
            self._file = open(self.path, "a", encoding="utf-8")
        else:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            try:
                self._db.executescript(
                    "CREATE TABLE IF NOT EXISTS retrievers (fingerprint TEXT PRIMARY KEY, description TEXT NOT NULL);"
                    "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, query TEXT NOT NULL,"
                    " k INTEGER NOT NULL, hits TEXT NOT NULL);"
                )
                for fp, desc in self._db.execute("SELECT fingerprint, description FROM retrievers"):
                    self._descriptions[fp] = json.loads(desc)
            except (sqlite3.DatabaseError, ValueError) as e:  # not a database; or a row that is not JSON
                self._db.close()
                raise DataError(
                    f"not a readable retrieval cache ({e}); delete the file to start over", path=self.path
                ) from e

    def descriptions(self) -> list[dict[str, Any]]:
        """The retriever descriptions recorded in this cache."""
        return list(self._descriptions.values())

    def get(self, key: str) -> list[Hit] | None:
        with self._lock:
            if self.kind == "jsonl":
                rows = self._entries.get(key)
            else:
                found = self._db.execute("SELECT hits FROM entries WHERE key = ?", (key,)).fetchone()
                rows = None if found is None else json.loads(found[0])
        return None if rows is None else _hits_from_json(rows)

    def put(self, key: str, description: dict[str, Any], query: str, k: int, hits: Sequence[Hit]) -> None:
        fp = fingerprint(description)
        rows = _hits_to_json(hits)
        with self._lock:
            new_retriever = fp not in self._descriptions
            self._descriptions[fp] = description
            if self.kind == "jsonl":
                if new_retriever:
                    self._write_line({"type": "retriever", "fingerprint": fp, "description": description})
                self._write_line({"type": "entry", "key": key, "fingerprint": fp, "query": query, "k": k, "hits": rows})
                self._entries[key] = rows
                self._file.flush()
            else:
                with self._db:
                    if new_retriever:
                        self._db.execute(
                            "INSERT OR REPLACE INTO retrievers VALUES (?, ?)",
                            (fp, json.dumps(description, sort_keys=True)),
                        )
                    self._db.execute(
                        "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)",
                        (key, fp, query, k, json.dumps(rows, ensure_ascii=False)),
                    )

    def __len__(self) -> int:
        with self._lock:
            if self.kind == "jsonl":
                return len(self._entries)
            return int(self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self.kind == "jsonl":
                self._file.close()
            else:
                self._db.close()

    def _write_line(self, obj: dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")

    def _load_jsonl(self) -> None:
        if not self.path.is_file():
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.readlines()
        except UnicodeDecodeError as e:
            raise DataError(
                f"not a retrieval cache: not UTF-8 text ({e.reason} at byte {e.start}); delete the file to start over",
                path=self.path,
            ) from None
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if obj["type"] == "retriever":
                    self._descriptions[obj["fingerprint"]] = obj["description"]
                else:
                    self._entries[obj["key"]] = obj["hits"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                if lineno == len(lines) and not line.endswith("\n"):
                    # A crash mid-write leaves a partial last line; the entries before it are intact.
                    logger.warning("ignoring a truncated last line in retrieval cache %s", self.path)
                    continue
                raise DataError(
                    f"corrupt retrieval cache entry ({e}); delete the file to start over",
                    path=self.path,
                    record=f"line {lineno}",
                ) from e


class CachedRetriever:
    """A `Retriever` that records answers to, or replays them from, a `RetrievalCache`."""

    def __init__(
        self,
        retriever: Retriever | None,
        cache: RetrievalCache | str | Path,
        *,
        mode: CacheMode = "record",
        description: dict[str, Any] | None = None,
    ):
        """
        Args:
            retriever: answers cache misses in `record` mode; None is allowed in `replay` mode.
            cache: a `RetrievalCache` or the path of its file.
            mode: `record` (serve hits, retrieve and store misses) or `replay` (serve hits, raise
                `CacheMissError` on a miss).
            description: in replay mode without a retriever, which recorded retriever to replay; may be
                omitted when the cache holds exactly one.
        """
        if mode not in get_args(CacheMode):
            raise ConfigError(f"CachedRetriever mode must be 'record' or 'replay', got {mode!r}")
        if mode == "record" and retriever is None:
            raise ConfigError("record mode needs a retriever to answer cache misses")
        self.cache = cache if isinstance(cache, RetrievalCache) else RetrievalCache(cache)
        self.retriever, self.mode = retriever, mode
        if retriever is not None:
            self._description = retriever.describe()
        elif description is not None:
            self._description = description
        else:
            recorded = self.cache.descriptions()
            if len(recorded) != 1:
                raise ConfigError(
                    f"retrieval cache {self.cache.path} holds {len(recorded)} retriever descriptions; pass description= (or a retriever) to choose"
                )
            self._description = recorded[0]
        self.hits = self.misses = 0

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        keys = [cache_key(self._description, q, k) for q in queries]
        results: list[list[Hit] | None] = [self.cache.get(key) for key in keys]
        missing = [i for i, r in enumerate(results) if r is None]
        self.hits += len(queries) - len(missing)
        self.misses += len(missing)
        if missing:
            if self.mode == "replay" or self.retriever is None:
                raise CacheMissError(
                    f"{len(missing)} of {len(queries)} queries (first: {queries[missing[0]]!r}, k={k}) are not in {self.cache.path}; record them first"
                )
            fresh = self.retriever.search([queries[i] for i in missing], k)
            for i, hits in zip(missing, fresh):
                self.cache.put(keys[i], self._description, queries[i], k, hits)
                results[i] = hits
        return results  # type: ignore[return-value]

    def describe(self) -> dict[str, Any]:
        return self._description
