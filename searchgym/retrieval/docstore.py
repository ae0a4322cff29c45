"""An on-disk document store, so that a 21M-passage index can be served without the corpus as Python objects.

Layout, inside an index folder:

- `docs.jsonl`: one JSON array `[id, title, text]` per line, in index row order (`[id, title, text, 0]`
  for a document whose wiki-18 title line was not quoted);
- `docs.offsets.npy`: int64 byte offsets, n+1 of them (row i is bytes offsets[i]:offsets[i+1]).

Both are memory-mapped; a lookup decodes one line. Resident memory is the pages the OS keeps cached.
"""

from __future__ import annotations

import json
import mmap
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from searchgym.corpus import Document
from searchgym.errors import DataError

DOCS_FILE = "docs.jsonl"
OFFSETS_FILE = "docs.offsets.npy"


class DocStoreWriter:
    """Appends documents to a store folder; `close()` writes the offsets."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._file = open(self.folder / DOCS_FILE, "wb")
        self._offsets = array("q", [0])  # 8 bytes per document, not a Python int each

    def add(self, doc: Document) -> None:
        row = [doc.id, doc.title, doc.text] if doc.title_quoted else [doc.id, doc.title, doc.text, 0]
        line = json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
        self._file.write(line)
        self._offsets.append(self._offsets[-1] + len(line))

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.close()
        np.save(self.folder / OFFSETS_FILE, np.frombuffer(self._offsets, dtype=np.int64))

    def __enter__(self) -> DocStoreWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DocStore(Sequence[Document]):
    """Read-only documents from a store folder, looked up by row.

    `content_hash` is the hash recorded when the store was written (the corpus it came from), so a
    `DocStore` stands in for a `Corpus` wherever a retriever needs one.
    """

    def __init__(self, folder: str | Path, *, content_hash: str, name: str = "docstore"):
        self.folder = Path(folder)
        self.content_hash = content_hash
        self.name = name
        try:
            self._offsets = np.load(self.folder / OFFSETS_FILE, mmap_mode="r")
            with open(self.folder / DOCS_FILE, "rb") as f:
                size = f.seek(0, 2)
                self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except (OSError, ValueError) as e:
            raise DataError(
                f"document store is missing or unreadable ({e}); rebuild the index", path=self.folder
            ) from e
        if len(self._offsets) < 1 or int(self._offsets[-1]) != len(self._data):
            raise DataError(
                "document store offsets do not match docs.jsonl (truncated copy?); rebuild the index", path=self.folder
            )

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"document row {i} out of range (store has {n})")
        start, end = int(self._offsets[i]), int(self._offsets[i + 1])
        row = json.loads(self._data[start:end])
        return Document(row[0], row[1], row[2], len(row) < 4)

    def __iter__(self) -> Iterator[Document]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"DocStore({str(self.folder)!r}, documents={len(self)})"
