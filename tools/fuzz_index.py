"""Corrupted index folders: every kind of damage must end in a typed error naming the file, never a silent
load, an untyped exception or a crash of the process.

A small flat index (the ten-document test corpus, or `--docs N` synthetic documents) is built once; each
corruption kind is applied to a fresh copy, which is then opened with `load_index_parts` and searched once
in a child process (FAISS can take a process down with a bad read; a child's death is counted, not
suffered). Outcomes: `refused <ErrorClass>` (a `SearchGymError` whose message names the damaged file), or
a failure: `loaded silently`, `untyped <Exception>`, `unnamed <ErrorClass>` (a typed error that does not
name the file), `died <signal>`.

    python -m tools.fuzz_index [--docs 10] [--kind NAME ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import shutil
import struct
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

EMB, IDX, DOCS, OFFS, MAN = "embeddings.npy", "index.faiss", "docs.jsonl", "docs.offsets.npy", "manifest.json"


def _rewrite(path: Path, fn: Callable[[bytearray], bytes | bytearray]) -> None:
    path.write_bytes(bytes(fn(bytearray(path.read_bytes()))))


def _flip(at: Callable[[int], int]) -> Callable[[bytearray], bytearray]:
    def go(b: bytearray) -> bytearray:
        b[at(len(b))] ^= 0xFF
        return b
    return go


def _manifest(folder: Path, change: Callable[[dict], None]) -> None:
    m = json.loads((folder / MAN).read_text())
    change(m)
    (folder / MAN).write_text(json.dumps(m))


def _npy_huge_shape(b: bytearray) -> bytearray:
    # The same header length, claiming 10^12 rows: a reader that trusted it would allocate terabytes.
    header = bytes(b[10:128]).decode("latin1")
    start, end = header.index("("), header.index(")")
    dims = header[start + 1 : end].split(",")
    fake = f"(999999999999, {dims[1].strip()})"
    new = (header[:start] + fake + header[end + 1 :])[: len(header)]
    new = new.ljust(len(header) - 1)[: len(header) - 1] + "\n"
    b[10:128] = new.encode("latin1")
    return b


def _faiss_huge_ntotal(b: bytearray) -> bytearray:
    # IndexFlat header: 4-byte fourcc, int d, int64 ntotal: claim 2^60 vectors.
    b[8:16] = struct.pack("<q", 1 << 60)
    return b


def _same_hash_record(folder: Path, name: str) -> None:
    """Re-record a file's size and hash in the manifest, as a careless tool that 'fixes' a mismatch would."""
    data = (folder / name).read_bytes()
    record = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    def change(m: dict) -> None:
        # A manifest of sizes only (format 1) gets the size alone.
        m["files"][name] = len(data) if isinstance(m["files"].get(name), int) else record

    _manifest(folder, change)


def _kinds() -> dict[str, tuple[str, Callable[[Path], None]]]:
    """name -> (the file the error must name, the damage)."""
    k: dict[str, tuple[str, Callable[[Path], None]]] = {}
    for name in (IDX, EMB, DOCS, OFFS):
        short = name.split(".")[0] + ("_offsets" if name == OFFS else "")
        k[f"{short}: deleted"] = (name, lambda f, n=name: (f / n).unlink())
        k[f"{short}: emptied"] = (name, lambda f, n=name: (f / n).write_bytes(b""))
        k[f"{short}: truncated by half"] = (name, lambda f, n=name: _rewrite(f / n, lambda b: b[: len(b) // 2]))
        k[f"{short}: last byte cut"] = (name, lambda f, n=name: _rewrite(f / n, lambda b: b[:-1]))
        k[f"{short}: bytes appended"] = (name, lambda f, n=name: _rewrite(f / n, lambda b: b + b"\0" * 64))
        k[f"{short}: first byte flipped"] = (name, lambda f, n=name: _rewrite(f / n, _flip(lambda n_: 0)))
        k[f"{short}: middle byte flipped"] = (name, lambda f, n=name: _rewrite(f / n, _flip(lambda n_: n_ // 2)))
        k[f"{short}: last byte flipped"] = (name, lambda f, n=name: _rewrite(f / n, _flip(lambda n_: n_ - 1)))
        k[f"{short}: random bytes, same size"] = (name, lambda f, n=name: _rewrite(f / n, lambda b: os.urandom(len(b))))
        k[f"{short}: replaced by a folder"] = (name, lambda f, n=name: ((f / n).unlink(), (f / n).mkdir()))
    k["embeddings: header claims 10^12 rows"] = (EMB, lambda f: _rewrite(f / EMB, _npy_huge_shape))
    k["index: header claims 2^60 vectors"] = (IDX, lambda f: _rewrite(f / IDX, _faiss_huge_ntotal))
    k["embeddings and index swapped"] = (EMB, lambda f: (os.replace(f / EMB, f / "t"), os.replace(f / IDX, f / EMB),
                                                          os.replace(f / "t", f / IDX)))
    k["index: symlink to /dev/zero"] = (IDX, lambda f: ((f / IDX).unlink(), (f / IDX).symlink_to("/dev/zero")))
    k["index: 2^60 vectors, manifest re-recorded"] = (IDX, lambda f: (_rewrite(f / IDX, _faiss_huge_ntotal),
                                                                      _same_hash_record(f, IDX)))
    k["embeddings: 10^12 rows, manifest re-recorded"] = (EMB, lambda f: (_rewrite(f / EMB, _npy_huge_shape),
                                                                         _same_hash_record(f, EMB)))
    k["index: truncated, manifest re-recorded"] = (IDX, lambda f: (_rewrite(f / IDX, lambda b: b[: len(b) // 2]),
                                                                   _same_hash_record(f, IDX)))
    k["manifest: not JSON"] = (MAN, lambda f: (f / MAN).write_text("{not json"))
    k["manifest: emptied"] = (MAN, lambda f: (f / MAN).write_text(""))
    k["manifest: binary garbage"] = (MAN, lambda f: (f / MAN).write_bytes(os.urandom(300)))
    k["manifest: deleted"] = (MAN, lambda f: (f / MAN).unlink())
    k["manifest: a file's hash changed"] = (IDX, lambda f: _manifest(f, lambda m: m["files"][IDX].__setitem__("sha256", "0" * 64)
                                                          if isinstance(m["files"][IDX], dict) else None))
    k["manifest: a file's size changed"] = (EMB, lambda f: _manifest(f, lambda m: m["files"][EMB].__setitem__("size", 1)
                                                          if isinstance(m["files"][EMB], dict) else m["files"].__setitem__(EMB, 1)))
    k["manifest: files emptied"] = (MAN, lambda f: _manifest(f, lambda m: m.__setitem__("files", {})))
    k["manifest: num_docs a string"] = (MAN, lambda f: _manifest(f, lambda m: m.__setitem__("num_docs", "10")))
    k["manifest: num_docs off by one"] = (MAN, lambda f: _manifest(f, lambda m: m.__setitem__("num_docs", m["num_docs"] + 1)))
    k["manifest: dim changed"] = (MAN, lambda f: _manifest(f, lambda m: m.__setitem__("dim", 7)))
    k["manifest: index kind unknown"] = (MAN, lambda f: _manifest(f, lambda m: m["index"].__setitem__("kind", "lsh")))
    k["manifest: index kind hnsw for a flat file"] = (IDX, lambda f: _manifest(f, lambda m: m["index"].__setitem__("kind", "hnsw")))
    k["manifest: encoder points at a local folder"] = (MAN, lambda f: _manifest(f, lambda m: m["encoder"].__setitem__("model", "/etc")))
    k["manifest: encoder points at a hub id"] = (MAN, lambda f: _manifest(f, lambda m: m["encoder"].__setitem__("model", "evil/model")))
    k["manifest: a file outside the folder"] = (MAN, lambda f: _manifest(f, lambda m: m["files"].__setitem__(
        "../escape", {"size": 1, "sha256": "0" * 64})))
    k["manifest: future format"] = (MAN, lambda f: _manifest(f, lambda m: m.__setitem__("format_version", 99)))
    k["manifest: unknown field"] = (MAN, lambda f: _manifest(f, lambda m: m.__setitem__("surprise", 1)))
    k["manifest: deeply nested"] = (MAN, lambda f: (f / MAN).write_text("[" * 100_000 + "]" * 100_000))
    return k


KINDS = _kinds()


def load_outcome(folder: str) -> tuple[str, str]:
    """("loaded" | "typed <Error>" | "untyped <Exception>", message) for opening and searching `folder`."""
    try:
        import numpy as np

        from searchgym.errors import SearchGymError
        from searchgym.retrieval.index import load_index_parts

        try:
            parts = load_index_parts(folder)
            parts.index.search(np.ascontiguousarray(parts.embeddings[:1], dtype=np.float32), 3)
            _ = [parts.documents[i].title for i in range(len(parts.documents))]
            return "loaded", ""
        except SearchGymError as e:
            return f"typed {type(e).__name__}", str(e)
    except BaseException as e:  # noqa: BLE001 - what escapes is the finding
        return f"untyped {type(e).__name__}", str(e)[:300]


def _load_in_child(folder: str, queue) -> None:
    queue.put(load_outcome(folder))


def classify(kind: str, status: str, message: str) -> str:
    if status == "loaded":
        return "loaded silently"
    if status.startswith("typed "):
        name = status.removeprefix("typed ")
        return f"refused {name}" if KINDS[kind][0] in message else f"unnamed {name}"
    return status


def damaged_copy(built: Path, kind: str, work: Path) -> Path:
    folder = work / kind.replace(" ", "_").replace(":", "").replace("/", "_")
    shutil.copytree(built, folder)
    KINDS[kind][1](folder)
    return folder


def try_kind(built: Path, kind: str, work: Path, timeout_s: float = 120.0) -> tuple[str, str]:
    """(outcome, message) for one corruption kind applied to a copy of `built`."""
    folder = damaged_copy(built, kind, work)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_load_in_child, args=(str(folder), queue))
    child.start()
    child.join(timeout_s)
    if child.is_alive():
        child.kill()
        child.join()
        return "hung", f"no outcome within {timeout_s:g} s"
    if queue.empty():
        return f"died (exit {child.exitcode})", ""
    status, message = queue.get()
    return classify(kind, status, message), message


def build_small(folder: Path, n_docs: int) -> None:
    from searchgym.corpus import Corpus, Document
    from searchgym.retrieval.index import build_index

    docs = [Document(f"d{i}", f"Title {i}", f"Document number {i} about topic {i % 7}.") for i in range(n_docs)]
    build_index(Corpus(docs, name="fuzz-index"), folder)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="corrupt an index folder every way listed; silent loads must be 0")
    p.add_argument("--docs", type=int, default=10)
    p.add_argument("--kind", action="append", choices=sorted(KINDS))
    p.add_argument("--keep", help="build and damage the copies here instead of a temporary folder")
    args = p.parse_args(argv)
    kinds = args.kind or list(KINDS)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep or tmp)
        built = work / "built"
        build_small(built, args.docs)
        outcomes: Counter = Counter()
        bad = 0
        for kind in kinds:
            outcome, message = try_kind(built, kind, work)
            outcomes[outcome.split(" (")[0]] += 1
            ok = outcome.startswith("refused ")
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {kind:<48} {outcome:<28} {message[:110]}", flush=True)
    print(f"{len(kinds)} corruption kinds: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    return 1 if bad else 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
