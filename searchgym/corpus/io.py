"""Reading corpus files.

Formats, chosen by extension and, for jsonl, by the first record's fields:

- jsonl with `id` and `contents` (`"Title"\\ntext`), as FlashRAG and Search-R1 ship wiki-18;
- jsonl with `id`, `title` and `text` (BEIR's `corpus.jsonl`: `_id`, `title`, `text`);
- one JSON list of such objects (`.json` or `.jsonl` whose first character is `[`), as several multi-hop
  retrieval repositories ship their corpora (`[{"title": ..., "text": ...}, ...]`, often without ids);
- the KILT knowledge source (one page per line: `wikipedia_id`, `wikipedia_title`, `text` as a list of
  paragraphs), one document per paragraph (`searchgym.corpus.kilt`);
- DPR's tsv (`id<TAB>text<TAB>title` with a header line), as `psgs_w100.tsv`, read row by row.

A document's id is the first of its fields named in `ID_KEYS` (`id`, `_id`, `idx`, `doc_id`, `docid`,
`pid`, `passage_id`, ...; for tsv, the first such column). A record without one gets its 0-based
position in the file as id, and the file gets one warning saying so, which names any other field that
looks like an id (`chunk_id`) so that it can be renamed. A file with no documents is a `DataError`: an
empty corpus is never silently replaced by something else. Where a file ends inside a record, the error
says it looks truncated. With `on_error="skip"`, records that cannot be read (a jsonl line that is not a
document, a tsv row with the wrong number of fields, a repeated id in `load_corpus`) are left out, with
one warning that counts them and names the first; a file that cannot be decoded at all still raises.

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
from typing import Literal, get_args

from searchgym.corpus.corpus import Corpus, Document, split_contents
from searchgym.corpus.kilt import is_kilt_page, kilt_page_documents
from searchgym.errors import ConfigError, DataError, DataNotFoundError

logger = logging.getLogger(__name__)

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
ID_KEYS = (
    "id", "_id", "idx", "doc_id", "docid", "document_id", "pid", "passage_id", "para_id", "paragraph_id", "corpus_id"
)
"""The fields (and tsv columns) read as a document's id, the first present winning."""
_TRUNCATED = "the file ends inside this record: it looks truncated (an interrupted download or copy?)"
OnError = Literal["raise", "skip"]


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


def iter_corpus_file(path: str | Path, *, on_error: OnError = "raise") -> Iterator[Document]:
    """Yield the documents of a corpus file in order, without loading the file whole (a JSON list is
    parsed whole: it is one value).

    Raises `DataNotFoundError` if the file is missing and `DataError` (naming the file and line) for a
    record that is not valid JSON, has a non-scalar id, or has neither `contents` nor `text`, and for a
    file that holds no documents. With `on_error="skip"` such records are left out instead, and counted
    in one warning.
    """
    if on_error not in get_args(OnError):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    path = Path(path)
    if not path.exists():
        raise DataNotFoundError("corpus file not found" + (" (a broken symbolic link)" if path.is_symlink() else ""), path=path)
    if not path.is_file():
        # A folder, a pipe or a device exists: "not found" would send the user looking in the wrong place.
        raise DataError(f"is {file_kind(path)}, not a corpus file: give the path of the file itself", path=path)
    suffix = _stem_suffix(path)
    count = 0
    skipped: list[str] | None = [] if on_error == "skip" else None
    try:
        if suffix in (".tsv", ".csv"):
            documents = _iter_tsv(path, skipped)
        elif suffix in (".jsonl", ".json", ".jsonlines"):
            documents = _iter_json_list(path, skipped) if _starts_with_bracket(path) else _iter_jsonl(path, skipped)
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
    if skipped:
        if count == 0:
            raise DataError(f"none of the file's {len(skipped)} records can be read; the first: {skipped[0]}", path=path)
        logger.warning("%s: skipped %d records that cannot be read as documents (on_error='skip'); the first: %s",
                       path, len(skipped), " | ".join(skipped[:3]))
    if count == 0:
        raise DataError("the corpus file holds no documents (is it empty?); a corpus needs at least one", path=path)


def _starts_with_bracket(path: Path) -> bool:
    with _open_binary(path) as f:
        head = f.read(1 << 16)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1] == b"["


def _iter_json_list(path: Path, skipped: list[str] | None = None) -> Iterator[Document]:
    # Imported here: searchgym.data imports this package, so a module-level import would be circular.
    from searchgym.data.readers import iter_json_array

    warned = False
    for raw in iter_json_array(path):
        where = f"item {raw.number}"
        try:
            if isinstance(raw.value, dict) and is_kilt_page(raw.value):
                docs = kilt_page_documents(raw.value, path, where)
            else:
                doc, derived = _document_from_json(raw.value, path, where, raw.number)
                if derived and not warned:
                    warned = _warn_derived_ids(path, where, raw.value)
                docs = [doc]
            for doc in docs:
                _check_no_surrogates(doc, path, where)
        except DataError as e:
            if skipped is None:
                raise
            skipped.append(str(e))
            continue
        yield from docs


def _warn_derived_ids(path: Path, where: str, obj: dict) -> bool:
    # A field such as `chunk_id` is not read as the id (a page-level `wikipedia_id` would repeat across
    # passages), but the warning names it so that it can be renamed.
    idlike = [k for k in obj if isinstance(k, str) and k.lower().endswith("id") and k not in ID_KEYS]
    named = (f"; it has {', '.join(map(repr, idlike))}, which is not one of the id fields read ({', '.join(ID_KEYS)}): "
             "rename it to 'id' to keep it") if idlike else ""
    logger.warning(
        "%s: documents without an id field (the first at %s) get their 0-based position in the file as id; "
        "gold_docs and caches then depend on the file's order%s",
        path,
        where,
        named,
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


def _iter_jsonl(path: Path, skipped: list[str] | None = None) -> Iterator[Document]:
    warned = False
    position = 0
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"line {lineno}"
            # One plain path for the usual passage line: this loop reads wiki-18's 21M lines.
            try:
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError) as e:
                    raise _json_error(e, line, path, where) from None
                if isinstance(obj, dict) and "wikipedia_id" in obj and is_kilt_page(obj):
                    docs = kilt_page_documents(obj, path, where)
                    if _SURROGATE_ESCAPE.search(line):
                        for doc in docs:
                            _check_no_surrogates(doc, path, where)
                    position += len(docs)
                    yield from docs
                    continue
                doc, derived = _document_from_json(obj, path, where, position)
                if derived and not warned:
                    warned = _warn_derived_ids(path, where, obj)
                if _SURROGATE_ESCAPE.search(line):  # a valid surrogate pair passes; a lone one is refused
                    _check_no_surrogates(doc, path, where)
            except DataError as e:
                if skipped is None:
                    raise
                skipped.append(str(e))
                continue
            position += 1
            yield doc


def _json_error(e: ValueError | RecursionError, line: str, path: Path, where: str) -> DataError:
    if isinstance(e, json.JSONDecodeError):
        # "Truncated" only where the line really stops early: the file's last line, cut inside the value.
        cut = not line.endswith("\n") and (e.pos >= len(line.rstrip()) or e.msg.startswith("Unterminated"))
        hint = "; the line is cut short: is the file truncated?" if cut else ""
        return DataError(f"invalid JSON ({e.msg} at column {e.colno}){hint}", path=path, record=where)
    if isinstance(e, RecursionError):
        return DataError("the JSON is nested too deeply to read; is the file corrupt?", path=path, record=where)
    # Valid syntax Python still refuses, e.g. an integer of over 4300 digits.
    return DataError(f"unreadable JSON value: {e}", path=path, record=where)


def _document_from_json(obj: object, path: Path, where: str, position: int) -> tuple[Document, bool]:
    """The document, and whether its id was derived from its position (the record has none)."""
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}", path=path, record=where)
    doc_id = next((obj[k] for k in ID_KEYS if obj.get(k) is not None), None)
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


def _iter_tsv(path: Path, skipped: list[str] | None = None) -> Iterator[Document]:
    with _open_text(path) as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        header = next(reader, None)
        if header is None:
            return
        cols = [h.strip().lower() for h in header]
        id_col = next((k for k in ID_KEYS if k in cols), None)
        if id_col is None or "text" not in cols:
            raise DataError(
                f"DPR tsv needs a header line with an id column ({', '.join(ID_KEYS)}), 'text' and 'title'; "
                f"got {header}",
                path=path,
                record="line 1",
            )
        i_id, i_text = cols.index(id_col), cols.index("text")
        i_title = cols.index("title") if "title" in cols else None
        lineno = 1
        rows = enumerate(reader, 2)
        ahead = None
        try:
            while (item := ahead or next(rows, None)) is not None:
                ahead = None
                lineno, row = item
                if not row:
                    continue
                if len(row) != len(cols):
                    # Only a bad row pays for looking ahead: the file may end inside it.
                    ahead = next(rows, None)
                    cut = f" ({_TRUNCATED})" if ahead is None else ""
                    error = DataError(
                        f"expected {len(cols)} tab-separated fields ({', '.join(cols)}), got {len(row)}{cut}",
                        path=path,
                        record=f"line {lineno}",
                    )
                    if skipped is None:
                        raise error
                    skipped.append(str(error))
                    continue
                title = row[i_title] if i_title is not None else ""
                yield Document(row[i_id], title, row[i_text])
        except csv.Error as e:
            raise DataError(f"unreadable tsv row: {e}", path=path, record=f"line {lineno + 1}") from e


def load_corpus(path: str | Path, *, limit: int | None = None, on_error: OnError = "raise") -> Corpus:
    """Load a corpus file (see module docstring for formats) into memory; with `on_error="skip"`, records
    that cannot be read and documents whose id repeats an earlier one are left out, with a counted warning."""
    docs = []
    for doc in iter_corpus_file(path, on_error=on_error):
        docs.append(doc)
        if limit is not None and len(docs) >= limit:
            break
    if on_error == "skip":
        docs = _without_repeated_ids(docs, path)
    try:
        return Corpus(docs, name=Path(path).name)
    except ValueError as e:
        raise DataError(str(e), path=path, record=_first_duplicate(docs)) from e


def _without_repeated_ids(docs: list[Document], path: str | Path) -> list[Document]:
    seen: set[str] = set()
    kept, repeated = [], []
    for i, doc in enumerate(docs, 1):
        if doc.id in seen:
            repeated.append(f"document {i} (id {doc.id!r})")
        else:
            seen.add(doc.id)
            kept.append(doc)
    if repeated:
        logger.warning("%s: left out %d documents whose id repeats an earlier one (on_error='skip'); the first: %s",
                       path, len(repeated), ", ".join(repeated[:3]))
    return kept


def _first_duplicate(docs: list[Document]) -> str | None:
    """`document N` (1-based, in file order) of the first repeated id; searched only once Corpus has
    refused the documents, so loading keeps no second id table."""
    seen: set[str] = set()
    for i, doc in enumerate(docs, 1):
        if doc.id in seen:
            return f"document {i}"
        seen.add(doc.id)
    return None
