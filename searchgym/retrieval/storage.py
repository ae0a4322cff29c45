"""File-level pieces of an index folder: an atomic staging folder, a streaming `.npy` writer, the
incremental corpus hash, and file stamps."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.corpus import Document
from searchgym.errors import BatchError, DataNotFoundError


class Staging:
    """A temporary sibling folder that replaces `target` on success and is removed on failure.

    `complete_marker` names the file a finished folder always has: when another process has already
    put a finished folder in place (cache folders are keyed by content), ours is dropped.
    """

    def __init__(self, target: Path, complete_marker: str):
        self.target, self.complete_marker = target, complete_marker

    def __enter__(self) -> Path:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.tmp-", dir=self.target.parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.target.exists():
            shutil.rmtree(self.target, ignore_errors=True)
        try:
            os.replace(self.tmp, self.target)
        except OSError:
            shutil.rmtree(self.tmp, ignore_errors=True)
            if not (self.target / self.complete_marker).is_file():
                raise


def chunks(docs: Iterable[Document], size: int) -> Iterator[list[Document]]:
    it = iter(docs)
    while chunk := list(islice(it, size)):
        yield chunk


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def file_stamp(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise DataNotFoundError("corpus file not found", path=p)
    st = p.stat()
    return {"path": str(p.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


class NpyRowWriter:
    """Writes a float32 (n, dim) `.npy` file row chunk by row chunk, with n unknown until the end.

    A fixed-size header is reserved first and rewritten with the final shape on `close()`."""

    _HEADER = 128  # bytes; a multiple of 64 as the npy format asks, room for any realistic shape

    def __init__(self, path: Path, dim: int):
        self.path, self.dim, self.rows = path, dim, 0
        self._f = open(path, "wb")
        self._f.write(b"\0" * self._HEADER)

    def write(self, rows: np.ndarray) -> None:
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise BatchError(f"expected embeddings of shape (n, {self.dim}), got {rows.shape}")
        self._f.write(np.ascontiguousarray(rows, dtype="<f4").tobytes())
        self.rows += len(rows)

    def close(self) -> None:
        if self._f.closed:
            return
        header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({self.rows}, {self.dim}), }}"
        body_len = self._HEADER - 10  # magic (6) + version (2) + header length (2)
        header = header.ljust(body_len - 1) + "\n"
        self._f.seek(0)
        self._f.write(b"\x93NUMPY\x01\x00" + body_len.to_bytes(2, "little") + header.encode("latin1"))
        self._f.close()
