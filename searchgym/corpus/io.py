"""Reading corpus files.

Formats, chosen by extension and, for jsonl, by the first record's fields:

- jsonl with `id` and `contents` (`"Title"\\ntext`), as FlashRAG and Search-R1 ship wiki-18;
- jsonl with `id`, `title` and `text`;
- DPR's tsv (`id<TAB>text<TAB>title` with a header line), as `psgs_w100.tsv`.

`iter_corpus_file` streams documents one at a time so that a 21M-passage file never has to be held as
Python objects; `load_corpus` collects them into a `Corpus`.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from searchgym.corpus.corpus import Corpus, Document, split_contents
from searchgym.errors import DataError, DataNotFoundError

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


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
    """Yield the documents of a corpus file in order, without loading the file whole.

    Raises `DataNotFoundError` if the file is missing and `DataError` (naming the file and line) for a
    record that is not valid JSON, lacks an id, or has neither `contents` nor `text`.
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError("corpus file not found", path=path)
    suffix = _stem_suffix(path)
    try:
        if suffix in (".tsv", ".csv"):
            yield from _iter_tsv(path)
        elif suffix in (".jsonl", ".json", ".jsonlines"):
            yield from _iter_jsonl(path)
        else:
            raise DataError(f"unknown corpus format {suffix!r}: use .jsonl (id+contents or id+title+text) or DPR .tsv", path=path)
    except UnicodeDecodeError as e:
        raise _not_utf8(path, e) from None
    except (EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"truncated or corrupt compressed file: {e}", path=path) from e


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
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"invalid JSON ({e.msg} at column {e.colno}); is the file truncated?", path=path, record=f"line {lineno}") from e
            except RecursionError:
                raise DataError("the JSON is nested too deeply to read; is the file corrupt?", path=path, record=f"line {lineno}") from None
            except ValueError as e:  # valid syntax Python still refuses, e.g. an integer of over 4300 digits
                raise DataError(f"unreadable JSON value: {e}", path=path, record=f"line {lineno}") from None
            doc = _document_from_json(obj, path, lineno)
            if _SURROGATE_ESCAPE.search(line):  # a valid surrogate pair passes; a lone one is refused
                _check_no_surrogates(doc, path, f"line {lineno}")
            yield doc


def _document_from_json(obj: object, path: Path, lineno: int) -> Document:
    where = f"line {lineno}"
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}", path=path, record=where)
    doc_id = obj.get("id", obj.get("_id"))
    if doc_id is None or isinstance(doc_id, (dict, list, bool)):
        raise DataError("missing or non-scalar 'id' field (expected a string or a number)", path=path, record=where)
    if "contents" in obj:
        contents = obj["contents"]
        if not isinstance(contents, str):
            raise DataError(f"'contents' must be a string, got {type(contents).__name__}", path=path, record=where)
        title, text, quoted = split_contents(contents)
        return Document(str(doc_id), title, text, quoted)
    elif "text" in obj:
        title, text = obj.get("title", ""), obj["text"]
        if not isinstance(text, str) or not isinstance(title, str):
            raise DataError("'title' and 'text' must be strings", path=path, record=where)
    else:
        raise DataError("a corpus record needs 'contents' or 'text' (with an optional 'title')", path=path, record=where)
    return Document(str(doc_id), title, text)


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
                if len(row) < len(cols):
                    raise DataError(f"expected {len(cols)} tab-separated fields, got {len(row)}; is the file truncated?", path=path, record=f"line {lineno}")
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
