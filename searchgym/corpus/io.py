"""Reading corpus files.

Formats, chosen by extension and, for jsonl, by the first record's fields:

- jsonl with `id` and `contents` (`"Title"\\ntext`), as FlashRAG and Search-R1 ship wiki-18;
- jsonl with `id`, `title` and `text`;
- one JSON list of such objects (`.json` or `.jsonl` whose first character is `[`), as several multi-hop
  retrieval repositories ship their corpora (`[{"title": ..., "text": ...}, ...]`, often without ids);
- DPR's tsv (`id<TAB>text<TAB>title` with a header line), as `psgs_w100.tsv`.

A document's id is its `id` (or `_id`, or `idx`). A record without one gets its 0-based position in the
file as id, and the file gets one warning saying so. A file with no documents is a `DataError`: an empty
corpus is never silently replaced by something else.

`iter_corpus_file` streams documents one at a time so that a 21M-passage file never has to be held as
Python objects; `load_corpus` collects them into a `Corpus`.
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from searchgym.corpus.corpus import Corpus, Document, split_contents
from searchgym.errors import DataError, DataNotFoundError

logger = logging.getLogger(__name__)

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
_ID_KEYS = ("id", "_id", "idx")


def file_kind(path: Path) -> str:
    """What is at `path`, in words, for a message about a path that should be a regular file."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "a broken symbolic link" if path.is_symlink() else "nothing"
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _open_text(path: Path, encoding: str = "utf-8-sig"):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return open(path, encoding=encoding, newline="")


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _stem_suffix(path: Path) -> str:
    suffixes = [s for s in path.suffixes if s != ".gz"]
    return suffixes[-1] if suffixes else ""


def iter_corpus_file(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a corpus file in order, without loading the file whole (a JSON list is
    parsed whole: it is one value).

    Raises `DataNotFoundError` if the file is missing and `DataError` (naming the file and line) for a
    record that is not valid JSON, has a non-scalar id, or has neither `contents` nor `text`, and for a
    file that holds no documents.
    """
    path = Path(path)
    if not path.exists():
        raise DataNotFoundError("corpus file not found" + (" (a broken symbolic link)" if path.is_symlink() else ""), path=path)
    if not path.is_file():
        # A folder, a pipe or a device exists: "not found" would send the user looking in the wrong place.
        raise DataError(f"is {file_kind(path)}, not a corpus file: give the path of the file itself", path=path)
    suffix = _stem_suffix(path)
    count = 0
    try:
        if suffix in (".tsv", ".csv"):
            documents = _iter_tsv(path)
        elif suffix in (".jsonl", ".json", ".jsonlines"):
            documents = _iter_json_list(path) if _starts_with_bracket(path) else _iter_jsonl(path)
        else:
            raise DataError(
                f"unknown corpus format {suffix!r}: use .jsonl (id+contents or id+title+text), a JSON list or DPR .tsv",
                path=path,
            )
        for doc in documents:
            count += 1
            yield doc
    except UnicodeDecodeError as e:
        raise _not_utf8(path, e) from None
    except (EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"truncated or corrupt compressed file: {e}", path=path) from e
    if count == 0:
        raise DataError("the corpus file holds no documents (is it empty?); a corpus needs at least one", path=path)


def _starts_with_bracket(path: Path) -> bool:
    with _open_binary(path) as f:
        head = f.read(1 << 16)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1] == b"["


def _iter_json_list(path: Path) -> Iterator[Document]:
    # Imported here: searchgym.data imports this package, so a module-level import would be circular.
    from searchgym.data.readers import iter_json_array

    warned = False
    for raw in iter_json_array(path):
        where = f"item {raw.number}"
        doc, derived = _document_from_json(raw.value, path, where, raw.number)
        if derived and not warned:
            warned = _warn_derived_ids(path, where)
        _check_no_surrogates(doc, path, where)
        yield doc


def _warn_derived_ids(path: Path, where: str) -> bool:
    logger.warning(
        "%s: documents without an 'id' (the first at %s) get their 0-based position in the file as id; "
        "gold_docs and caches then depend on the file's order",
        path,
        where,
    )
    return True


def _not_utf8(path: Path, error: UnicodeDecodeError) -> DataError:
    """The error for a file that is not UTF-8, naming the first line that is not (found by reading the file
    again as bytes: this runs only once decoding has failed, so valid files pay nothing for it)."""
    try:
        with _open_binary(path) as f:
            for lineno, raw in enumerate(f, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    return DataError(
                        f"not UTF-8 text (byte {raw[e.start : e.start + 1]!r} at column {e.start + 1}); corpus files must "
                        "be UTF-8: re-encode the file, e.g. `iconv -f latin1 -t utf-8`",
                        path=path,
                        record=f"line {lineno}",
                    )
    except (OSError, EOFError):
        pass
    return DataError(f"not UTF-8 text ({error.reason})", path=path)


def _iter_jsonl(path: Path) -> Iterator[Document]:
    warned = False
    position = 0
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"line {lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                # "Truncated" only where the line really stops early: the file's last line, cut inside the value.
                cut = not line.endswith("\n") and (e.pos >= len(line.rstrip()) or e.msg.startswith("Unterminated"))
                hint = "; the line is cut short: is the file truncated?" if cut else ""
                raise DataError(f"invalid JSON ({e.msg} at column {e.colno}){hint}", path=path, record=where) from e
            except RecursionError:
                raise DataError("the JSON is nested too deeply to read; is the file corrupt?", path=path, record=where) from None
            except ValueError as e:  # valid syntax Python still refuses, e.g. an integer of over 4300 digits
                raise DataError(f"unreadable JSON value: {e}", path=path, record=where) from None
            doc, derived = _document_from_json(obj, path, where, position)
            position += 1
            if derived and not warned:
                warned = _warn_derived_ids(path, where)
            if _SURROGATE_ESCAPE.search(line):  # a valid surrogate pair passes; a lone one is refused
                _check_no_surrogates(doc, path, where)
            yield doc


def _document_from_json(obj: object, path: Path, where: str, position: int) -> tuple[Document, bool]:
    """The document, and whether its id was derived from its position (the record has none)."""
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}", path=path, record=where)
    doc_id = next((obj[k] for k in _ID_KEYS if obj.get(k) is not None), None)
    derived = doc_id is None
    if derived:
        doc_id = position
    elif isinstance(doc_id, (dict, list, bool)):
        raise DataError("non-scalar 'id' field (expected a string or a number)", path=path, record=where)
    if "contents" in obj:
        contents = obj["contents"]
        if not isinstance(contents, str):
            raise DataError(f"'contents' must be a string, got {type(contents).__name__}", path=path, record=where)
        title, text, quoted = split_contents(contents)
        return Document(str(doc_id), title, text, quoted), derived
    if "text" in obj:
        title, text = obj.get("title", ""), obj["text"]
        if not isinstance(text, str) or not isinstance(title, str):
            raise DataError("'title' and 'text' must be strings", path=path, record=where)
        return Document(str(doc_id), title, text), derived
    raise DataError(
        f"a corpus record needs 'contents' or 'text' (with an optional 'title'); found keys {sorted(obj)}",
        path=path,
        record=where,
    )


# Lone UTF-16 surrogates come only from JSON's \uXXXX escapes (UTF-8 decoding refuses their bytes). No valid
# text holds them, and they fail far from the file (a server encoding its response), so they are refused
# here. Only lines holding such an escape are checked, which keeps reading wiki-18 as fast as before.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_no_surrogates(doc: Document, path: Path, where: str) -> None:
    for name, value in (("id", doc.id), ("title", doc.title), ("text", doc.text)):
        bad = _SURROGATE.search(value)
        if bad is not None:
            raise DataError(
                f"the {name} holds the unpaired surrogate {bad.group()!a}, which is not valid Unicode text "
                "(a broken \\uXXXX escape?)",
                path=path,
                record=where,
            )


def _iter_tsv(path: Path) -> Iterator[Document]:
    with _open_text(path) as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        header = next(reader, None)
        if header is None:
            return
        cols = [h.strip().lower() for h in header]
        if "id" in cols and "text" in cols:
            i_id, i_text = cols.index("id"), cols.index("text")
            i_title = cols.index("title") if "title" in cols else None
        else:
            raise DataError("DPR tsv needs a header line with 'id', 'text' and 'title' columns", path=path, record="line 1")
        lineno = 1
        try:
            for lineno, row in enumerate(reader, 2):
                if not row:
                    continue
                if len(row) != len(cols):
                    raise DataError(
                        f"expected {len(cols)} tab-separated fields ({', '.join(cols)}), got {len(row)}",
                        path=path,
                        record=f"line {lineno}",
                    )
                title = row[i_title] if i_title is not None else ""
                yield Document(row[i_id], title, row[i_text])
        except csv.Error as e:
            raise DataError(f"unreadable tsv row: {e}", path=path, record=f"line {lineno + 1}") from e


def load_corpus(path: str | Path, *, limit: int | None = None) -> Corpus:
    """Load a corpus file (see module docstring for formats) into memory."""
    docs = []
    for doc in iter_corpus_file(path):
        docs.append(doc)
        if limit is not None and len(docs) >= limit:
            break
    try:
        return Corpus(docs, name=Path(path).name)
    except ValueError as e:
        raise DataError(str(e), path=path, record=_first_duplicate(docs)) from e


def _first_duplicate(docs: list[Document]) -> str | None:
    """`document N` (1-based, in file order) of the first repeated id; searched only once Corpus has
    refused the documents, so loading keeps no second id table."""
    seen: set[str] = set()
    for i, doc in enumerate(docs, 1):
        if doc.id in seen:
            return f"document {i}"
        seen.add(doc.id)
    return None
