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
import sys
from collections.abc import Iterator
from pathlib import Path

from searchgym.corpus.corpus import Corpus, Document, parse_contents
from searchgym.errors import DataError, DataNotFoundError

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


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
        raise DataError(f"not UTF-8 text ({e.reason} at byte {e.start})", path=path) from e
    except (EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"truncated or corrupt compressed file: {e}", path=path) from e


def _iter_jsonl(path: Path) -> Iterator[Document]:
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"invalid JSON ({e.msg} at column {e.colno}); is the file truncated?", path=path, record=f"line {lineno}") from e
            yield _document_from_json(obj, path, lineno)


def _document_from_json(obj: object, path: Path, lineno: int) -> Document:
    where = f"line {lineno}"
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object, got {type(obj).__name__}", path=path, record=where)
    doc_id = obj.get("id", obj.get("_id"))
    if doc_id is None or isinstance(doc_id, (dict, list)):
        raise DataError("missing or non-scalar 'id' field", path=path, record=where)
    if "contents" in obj:
        contents = obj["contents"]
        if not isinstance(contents, str):
            raise DataError(f"'contents' must be a string, got {type(contents).__name__}", path=path, record=where)
        title, text = parse_contents(contents)
    elif "text" in obj:
        title, text = obj.get("title", ""), obj["text"]
        if not isinstance(text, str) or not isinstance(title, str):
            raise DataError("'title' and 'text' must be strings", path=path, record=where)
    else:
        raise DataError("a corpus record needs 'contents' or 'text' (with an optional 'title')", path=path, record=where)
    return Document(str(doc_id), title, text)


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
        for lineno, row in enumerate(reader, 2):
            if not row:
                continue
            if len(row) < len(cols):
                raise DataError(f"expected {len(cols)} tab-separated fields, got {len(row)}; is the file truncated?", path=path, record=f"line {lineno}")
            title = row[i_title] if i_title is not None else ""
            yield Document(row[i_id], title, row[i_text])


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
        raise DataError(str(e), path=path) from e
