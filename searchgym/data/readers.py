"""Read a dataset file's container into raw records: jsonl, a JSON list, parquet, TSV or CSV, each
optionally `.gz`.

The container is chosen by the extension (`.json`, `.jsonl`/`.ndjson`, `.parquet`, `.tsv`, `.csv`, under an
optional `.gz`), else by the file's first bytes. TSV and CSV files need a header line and are read by
`searchgym.data.delimited`; every value there is a string. Each raw record keeps its position for error
messages: `line N` (1-based) for jsonl, TSV and CSV, the 0-based list index for JSON lists, `row N`
(0-based) for parquet. Invalid UTF-8, malformed JSON and truncated or corrupt (compressed) data raise a
`DataError` naming the file and, where it can be told, the record; where the file ends inside a record
(a jsonl line, a list element, a quoted CSV field, a parquet file without its footer) the message says the
file looks truncated. Records are yielded one at a time, so a caller that stops early (`limit`) leaves
the rest of a jsonl or parquet file unread.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from searchgym.errors import DataError

_WS = re.compile(r"[ \t\n\r]*")
_SURROGATE = re.compile("[\udc80-\udcff]")

TRUNCATED = "the file ends inside this record: it looks truncated (an interrupted download or copy?)"
"""What an error in a record that the file ends inside adds to its message."""
SKIP_HINT = (
    "; to leave out the records that cannot be read, with one warning that counts them, pass on_error='skip' "
    "(load_dataset_file, load_records or gym.make)"
)
"""What an error in one record adds to its message, where skipping the record would let the file load."""


class RawRecord(NamedTuple):
    """One record as read from the file, before any format is applied."""
    where: str
    """The record's position, as error messages show it."""
    number: int
    """Line number (jsonl), list index (JSON) or row (parquet)."""
    value: Any
    cut: bool = False
    """The file ends inside this record, without a final newline: an error in it says the file looks truncated."""


class Unreadable(NamedTuple):
    """Stands for a record whose line could not be decoded, when the caller asked to skip such records."""

    message: str
    """The error the record would have raised, file and position included."""


def record_label(raw: RawRecord) -> str:
    """The record's position, with its id where it has one, as error messages show it."""
    value = raw.value
    if isinstance(value, Mapping):
        rid = value.get("_id", value.get("id"))
        if isinstance(rid, (str, int)) and not isinstance(rid, bool):
            return f"{raw.where} (id {rid!r})"
    return raw.where


def iter_raw_records(file: Path, *, skip_bad_lines: bool = False) -> Iterator[RawRecord]:
    """The file's raw records. With `skip_bad_lines`, a jsonl line that is not JSON (or a TSV/CSV row with
    the wrong number of fields) comes as an `Unreadable` value instead of raising; a broken JSON list or
    parquet file still raises, since nothing after the break can be located."""
    kind = container_kind(file)
    if kind == "parquet":
        return _iter_parquet(file)
    if kind in ("tsv", "csv"):
        # Imported here: the delimited reader builds on this module's records and byte readers.
        from searchgym.data.delimited import iter_delimited

        return iter_delimited(file, "\t" if kind == "tsv" else ",", skip_bad_lines)
    if _first_significant_byte(file) == b"[":
        return iter_json_array(file)
    return _iter_json_lines(file, skip_bad_lines)


def _is_gzip(file: Path) -> bool:
    return file.name.lower().endswith(".gz")


def _inner_suffix(file: Path) -> str:
    name = file.name.lower()
    name = name.removesuffix(".gz")
    return Path(name).suffix


def container_kind(file: Path) -> str:
    suffix = _inner_suffix(file)
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".json", ".jsonl", ".ndjson"):
        return "json"
    if suffix in (".tsv", ".csv"):
        return suffix[1:]
    head = _read_head(file, 4)
    if head == b"PAR1":
        return "parquet"
    if _first_significant_byte(file) in (b"[", b"{"):
        return "json"
    raise DataError(
        f"unsupported file type {suffix or '(no extension)'!r}: expected .json, .jsonl, .parquet, .tsv or .csv, "
        "optionally .gz",
        path=file,
    )


def _open_binary(file: Path) -> BinaryIO:
    if _is_gzip(file):
        return gzip.open(file, "rb")  # type: ignore[return-value]
    return open(file, "rb")


def _read_head(file: Path, n: int) -> bytes:
    try:
        with _open_binary(file) as fh:
            return fh.read(n)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read the file: {exc}", path=file) from exc


def _first_significant_byte(file: Path) -> bytes:
    """The first byte that is not whitespace or a UTF-8 byte-order mark, or b"" for an empty file."""
    head = _read_head(file, 1 << 16)
    head = head.removeprefix(codecs.BOM_UTF8).lstrip(b" \t\r\n")
    return head[:1]


def _iter_json_lines(file: Path, skip_bad_lines: bool = False) -> Iterator[RawRecord]:
    try:
        with _open_binary(file) as fh:
            for lineno, line in enumerate(fh, 1):
                try:
                    raw = _decode_json_line(file, lineno, line, "" if skip_bad_lines else SKIP_HINT)
                except DataError as exc:
                    if not skip_bad_lines:
                        raise
                    raw = RawRecord(f"at line {lineno}", lineno, Unreadable(str(exc)))
                if raw is not None:
                    yield raw._replace(cut=True) if not line.endswith(b"\n") else raw
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read the file (truncated or corrupt compressed data?): {exc}", path=file) from exc


def _decode_json_line(file: Path, lineno: int, line: bytes, hint: str) -> RawRecord | None:
    where = f"at line {lineno}"
    if lineno == 1:
        line = line.removeprefix(codecs.BOM_UTF8)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            not_utf8_message(line[exc.start : exc.start + 1], f"column {exc.start + 1}"), path=file, record=where
        ) from None
    if not text.strip():
        return None
    try:
        return RawRecord(where, lineno, json.loads(text))
    except json.JSONDecodeError as exc:
        if re.search(b"\r(?!\n|$)", line):
            # Lines ended by a carriage return alone come in as one line holding every record.
            raise DataError(
                "the lines end in a carriage return alone (CR, classic Mac line endings): JSON lines need LF or "
                "CRLF; convert the file, e.g. `tr '\\r' '\\n' < in.jsonl > out.jsonl`",
                path=file,
                record=where,
            ) from None
        cut = (
            " (the line is cut short: is the file truncated?)"
            if not line.endswith(b"\n") or exc.pos >= len(text.rstrip())
            else ""
        )
        raise DataError(
            f"invalid JSON at column {exc.colno}: {exc.msg}{cut}; each line must hold one JSON object{hint}",
            path=file,
            record=where,
        ) from None
    except (ValueError, RecursionError) as exc:
        raise DataError(_unreadable_json_message(exc), path=file, record=where) from None


def _unreadable_json_message(exc: ValueError | RecursionError) -> str:
    """Valid JSON syntax that Python's decoder still refuses: nesting deeper than its recursion limit, or
    an integer longer than `sys.get_int_max_str_digits()`."""
    if isinstance(exc, RecursionError):
        return "the JSON is nested too deeply to read (thousands of levels): is the file corrupt?"
    return f"unreadable JSON value: {exc}"


def not_utf8_message(bad: bytes, position: str) -> str:
    return (
        f"not valid UTF-8 (byte {bad!r} at {position}); dataset files must be UTF-8: "
        "re-encode the file, e.g. `iconv -f latin1 -t utf-8`"
    )


def read_all_bytes(file: Path) -> bytes:
    try:
        with _open_binary(file) as fh:
            return fh.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read the file (truncated or corrupt compressed data?): {exc}", path=file) from exc


def _read_all_text(file: Path) -> str:
    data = read_all_bytes(file)
    # surrogateescape keeps undecodable bytes as lone surrogates so that the record holding them can be
    # named once the list has been split into records.
    return data.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="surrogateescape")


def iter_json_array(file: Path) -> Iterator[RawRecord]:
    """The elements of the file's top-level JSON list, one at a time."""
    text = _read_all_text(file)
    bad = _SURROGATE.search(text)
    bad_pos = bad.start() if bad else None
    for index, value, start, end in _scan_json_array(text, file):
        if bad_pos is not None and start <= bad_pos < end:
            line = text.count("\n", 0, bad_pos) + 1
            raw_byte = text[bad_pos].encode("utf-8", "surrogateescape")
            raise DataError(not_utf8_message(raw_byte, f"line {line}"), path=file, record=index)
        yield RawRecord(str(index), index, value)


def _scan_json_array(text: str, file: Path) -> Iterator[tuple[int, Any, int, int]]:
    """Yield (index, value, start, end) for each element of the top-level JSON list in `text`.

    Decoding element by element (rather than `json.loads` of the whole text) lets errors name the record
    and lets `limit` stop early.
    """
    decoder = json.JSONDecoder()
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] != "[":
        raise DataError("expected a JSON list of records", path=file)
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] == "]":
        _check_array_end(text, pos, file)
        return
    index = 0
    while True:
        value, end = _decode_element(decoder, text, pos, index, file)
        yield index, value, pos, end
        pos = _WS.match(text, end).end()  # type: ignore[union-attr]
        sep = text[pos : pos + 1]
        if sep == "]":
            _check_array_end(text, pos, file)
            return
        if sep != ",":
            found = "the end of the file (is the file truncated?)" if not sep else repr(sep)
            raise DataError(f"expected ',' or ']' after this record, found {found}", path=file, record=index)
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        index += 1


def _decode_element(decoder: json.JSONDecoder, text: str, pos: int, index: int, file: Path) -> tuple[Any, int]:
    try:
        return decoder.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        hint = " (the file ends inside this record: is it truncated?)" if exc.pos >= len(text.rstrip()) else ""
        raise DataError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}", path=file, record=index
        ) from None
    except (ValueError, RecursionError) as exc:
        raise DataError(_unreadable_json_message(exc), path=file, record=index) from None


def _check_array_end(text: str, pos: int, file: Path) -> None:
    rest = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if rest != len(text):
        line = text.count("\n", 0, rest) + 1
        raise DataError(f"unexpected data after the closing ']' of the record list, at line {line}", path=file)


def _iter_parquet(file: Path) -> Iterator[RawRecord]:
    pq = _import_parquet(file)
    source: Any = io.BytesIO(read_all_bytes(file)) if _is_gzip(file) else file
    try:
        reader = pq.ParquetFile(source)
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError subclasses; none should escape raw
        raise DataError(f"not a readable parquet file: {exc}{_cut_parquet_hint(file)}", path=file) from exc
    row = 0
    try:
        for batch in reader.iter_batches(batch_size=1024):
            for value in batch.to_pylist():
                yield RawRecord(f"at row {row}", row, value)
                row += 1
    except (OSError, ValueError, TypeError, NotImplementedError) as exc:  # pyarrow's errors derive from these
        raise DataError(
            f"cannot read the parquet data near row {row}: {exc}", path=file, record=f"at row {row}"
        ) from exc


def _cut_parquet_hint(file: Path) -> str:
    """Why a file that starts as parquet cannot be opened: a parquet file ends with its footer and the same
    magic bytes it starts with, so a file with the first but not the last was cut off."""
    data = read_all_bytes(file)
    if data[:4] == b"PAR1" and data[-4:] != b"PAR1":
        return (
            f" (the file starts as parquet but its footer is missing after {len(data)} bytes: it looks truncated, "
            "e.g. an interrupted download or copy; fetch it again)"
        )
    return ""


def _import_parquet(file: Path) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DataError("reading parquet needs pyarrow: pip install pyarrow", path=file) from exc
    return pq
