"""File integrity of an index folder: each file's size and SHA-256, recorded at build and checked on load.

FAISS and numpy trust the bytes they read: a truncated or bit-flipped index can load silently with wrong
vectors, ask for a huge allocation (`MemoryError`), or crash the process inside FAISS. So the bytes are
checked against the manifest before either library reads them, and a mismatch is an
`IndexIntegrityError` naming the file.

Hashing a 60 GB wiki-18 index takes a minute or two, too long for every server start. After a full check
passes, the folder gets a stamp (`.verified.json`: each file's size, modification time, inode and the
SHA-256 it was checked against); a later load with the same stamp checks sizes and the stamp only
(`verify="fast"`, the default). A file rewritten since (new mtime or inode) is hashed again. What the fast
path cannot see is a change that keeps size, mtime and inode (a disk's silent bit rot): `verify="full"`
re-hashes everything (`searchgym index info --verify`).

Training checkpoints use the same records (`folder_records`, `verify_files` with their own `remedy`), and
`sync_tree` makes a folder's files and entries durable before it counts as complete.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path, PurePosixPath
from typing import Any, Literal, get_args

from searchgym.errors import ConfigError, IndexIntegrityError

logger = logging.getLogger(__name__)

STAMP_FILE = ".verified.json"
VerifyMode = Literal["fast", "full", "size"]
"""`fast`: sizes always, hashes once per file version (stamped); `full`: hash every file now; `size`: sizes
only (what indexes built before hashes were recorded allow)."""


def file_record(path: Path) -> dict[str, Any]:
    """`{"size", "sha256"}` of a file, as the manifest records it."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return {"size": path.stat().st_size, "sha256": digest}


def folder_records(folder: Path) -> dict[str, dict[str, Any]]:
    """`file_record` of every regular file under `folder` (hidden ones too, such as the `.metadata` of a
    sharded checkpoint), by path relative to it (`sub/name`): the `files` of a manifest."""
    return {p.relative_to(folder).as_posix(): file_record(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def sync_tree(folder: Path) -> None:
    """fsync every file under `folder`, then every folder from the deepest up: after a power loss the files
    hold what was written and the folders list them (without it, a crash can leave zero-byte files behind
    names that look complete)."""
    folders = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    for path in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        sync_folder(path)


def sync_folder(folder: Path) -> None:
    """fsync a folder's entries (a rename into it, a file created in it)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _outside(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return not parts or name.startswith("/") or "\\" in name or any(part in (".", "..") for part in parts)


def verify_files(folder: Path, files: dict[str, Any], *, mode: VerifyMode = "fast", remedy: str = "rebuild the index",
                 stamp_folder: bool = True) -> None:
    """Raise `IndexIntegrityError` (naming the file) unless every file in `files` (name -> record, or
    name -> size for indexes without hashes) is a regular file of the recorded size and hash. Names are
    paths relative to `folder`; `remedy` ends each message (what to do about a damaged file).
    `stamp_folder=False` leaves no stamp behind (a checkpoint is hashed in full every time it is read)."""
    if mode not in get_args(VerifyMode):
        raise ConfigError(f"verify must be 'fast', 'full' or 'size', got {mode!r}")
    stamp = _read_stamp(folder) if mode == "fast" else {}
    verified: dict[str, Any] = {}
    for name, record in sorted(files.items()):
        size, sha = (record, None) if isinstance(record, int) else (record.get("size"), record.get("sha256"))
        path = folder / name
        if _outside(name):
            raise IndexIntegrityError(f"lists a file outside the folder: {name!r}; {remedy}", path=folder / "manifest.json")
        try:
            st = path.stat()
        except OSError:
            raise IndexIntegrityError(f"missing from {folder}; {remedy}", path=path) from None
        if not path.is_file():  # a device such as /dev/zero would never finish hashing
            raise IndexIntegrityError(f"not a regular file; {remedy}", path=path)
        if st.st_size != size:
            raise IndexIntegrityError(
                f"holds {st.st_size} bytes, the manifest recorded {size} (truncated or overwritten); {remedy}",
                path=path,
            )
        if sha is None or mode == "size":
            continue
        seen = _identity(st)
        if stamp.get(name) == {**seen, "sha256": sha}:
            verified[name] = stamp[name]
            continue
        logger.info("checking the SHA-256 of %s (%.1f MB)", path, size / 1e6)
        got = file_record(path)["sha256"]
        if got != sha:
            raise IndexIntegrityError(
                f"SHA-256 {got[:16]}... differs from the manifest's {str(sha)[:16]}... (corrupted or altered); {remedy}",
                path=path,
            )
        verified[name] = {**seen, "sha256": sha}
    if stamp_folder and mode != "size" and verified and verified != stamp:
        _write_stamp(folder, verified)


def _identity(st: os.stat_result) -> dict[str, int]:
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def _read_stamp(folder: Path) -> dict[str, Any]:
    try:
        stamp = json.loads((folder / STAMP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def _write_stamp(folder: Path, verified: dict[str, Any]) -> None:
    tmp = folder / f"{STAMP_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(verified, sort_keys=True), encoding="utf-8")
        os.replace(tmp, folder / STAMP_FILE)
    except OSError as e:
        # A read-only folder still loads; it is just hashed again next time.
        logger.warning("cannot record that %s was verified (%s): every load will hash its files again", folder, e)
        tmp.unlink(missing_ok=True)
