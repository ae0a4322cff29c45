"""Rows of a TSV or CSV question file, with a header line, as raw records of string values.

Column names are stripped and lowercased (Bamboogle's `Question,Answer`). A first column without a name
is the index pandas writes by default (`DataFrame.to_csv` without `index=False`) and is left out. Rows
are read leniently, as Python's `csv` module does by default, except at the end: a file that ends inside a
quoted field was cut off, and its last record is refused as such instead of being read with whatever text
it kept. A last row without a final newline is marked `cut`, so that an error in it says the file looks
truncated.
"""

from __future__ import annotations

import codecs
import csv
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from searchgym.data.readers import SKIP_HINT, TRUNCATED, RawRecord, Unreadable, not_utf8_message, read_all_bytes
from searchgym.errors import DataError


class _Lines:
    """The text's lines for `csv.reader`, counting the characters handed out so far, so that the start of
    the row being read is known."""

    def __init__(self, text: str):
        self._lines = iter(io.StringIO(text, newline=""))
        self.offset = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.offset += len(line)
        return line


def iter_delimited(file: Path, delimiter: str, skip_bad_lines: bool = False) -> Iterator[RawRecord]:
    """Rows of a TSV or CSV file with a header line, as {lowercased column: string value}."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    kind = "TSV" if delimiter == "\t" else "CSV"
    text = _decode(file)
    lines = _Lines(text)
    reader = csv.reader(lines, delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None:
            return
        columns, drop_index = _columns(header, file)
        last: tuple[RawRecord | _Bad, int] | None = None
        while True:
            start = lines.offset
            row = next(reader, None)
            if row is None:
                break
            if not row:
                continue
            if last is not None:
                yield _checked(last[0], file, skip_bad_lines)
            last = (_record(reader.line_num, row, columns, drop_index, delimiter), start)
    except csv.Error as exc:
        raise DataError(f"unreadable {kind} row: {exc}", path=file, record=f"line {reader.line_num}") from exc
    if last is not None:
        yield _checked(_last_record(*last, text, delimiter), file, skip_bad_lines)


def _decode(file: Path) -> str:
    data = read_all_bytes(file).removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        message = not_utf8_message(data[exc.start : exc.start + 1], f"column {column}")
        raise DataError(message, path=file, record=f"line {line}") from None


def _columns(header: list[str], file: Path) -> tuple[list[str], bool]:
    """The lowercased column names, and whether the first column is pandas' unnamed index."""
    columns = [name.strip().lower() for name in header]
    drop_index = len(columns) > 1 and columns[0] == ""
    named = columns[1:] if drop_index else columns
    if len(set(named)) != len(named) or "" in named:
        raise DataError(f"the header line must name every column once, got {header}", path=file, record="line 1")
    return columns, drop_index


class _Bad(NamedTuple):
    """A row that cannot be read, before the caller decides whether it raises or is skipped."""

    where: str
    number: int
    message: str


def _record(
    line_num: int, row: list[str], columns: list[str], drop_index: bool, delimiter: str
) -> RawRecord | _Bad:
    where = f"line {line_num}"
    if len(row) != len(columns):
        separator = "tab" if delimiter == "\t" else "comma"
        named = ", ".join(c or "(index)" for c in columns)
        return _Bad(where, line_num, f"expected {len(columns)} {separator}-separated fields ({named}), got {len(row)}")
    pairs = list(zip(columns, row, strict=True))
    return RawRecord(where, line_num, dict(pairs[1:] if drop_index else pairs))


def _last_record(raw: RawRecord | _Bad, start: int, text: str, delimiter: str) -> RawRecord | _Bad:
    """The file's last row: refused when the file ends inside one of its quoted fields, marked `cut` when
    the file does not end with a newline."""
    if _ends_inside_quotes(text[start:], delimiter):
        return _Bad(raw.where, raw.number, f"{TRUNCATED}; a quoted field is never closed")
    if text.endswith(("\n", "\r")):
        return raw
    if isinstance(raw, _Bad):
        return raw._replace(message=f"{raw.message} ({TRUNCATED})")
    return raw._replace(cut=True)


def _ends_inside_quotes(tail: str, delimiter: str) -> bool:
    # The lenient reader takes the end of the file as the end of an open quoted field; the strict one
    # says so.
    try:
        for _ in csv.reader(io.StringIO(tail, newline=""), delimiter=delimiter, strict=True):
            pass
    except csv.Error as exc:
        return "unexpected end of data" in str(exc)
    return False


def _checked(raw: RawRecord | _Bad, file: Path, skip_bad_lines: bool) -> RawRecord:
    if isinstance(raw, RawRecord):
        return raw
    if not skip_bad_lines:
        raise DataError(raw.message + SKIP_HINT, path=file, record=raw.where)
    return RawRecord(raw.where, raw.number, Unreadable(str(DataError(raw.message, path=file, record=raw.where))))
