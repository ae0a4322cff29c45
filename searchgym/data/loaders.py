"""Read the public QA benchmark files into `QARecord`s, and their context paragraphs into a `Corpus`.

Supported formats (`format=` names), detected from the file extension (`.json`, `.jsonl`, `.parquet`,
each optionally `.gz`) and the first record's keys:

- `hotpotqa`: HotpotQA's official JSON list (`_id, question, answer, type, level,
  supporting_facts [[title, sent_id]], context [[title, [sentences]]]`).
- `hotpotqa_hf`: the Hugging Face `hotpot_qa` rows (jsonl or parquet), with `supporting_facts` and
  `context` stored column-wise (`{title: [...], sent_id: [...]}`, `{title: [...], sentences: [[...]]}`).
- `2wiki`: 2WikiMultihopQA's official JSON, HotpotQA's layout plus `evidences [[subject, relation, object]]`.
- `musique`: MuSiQue's official JSON list or jsonl (`id, paragraphs, question, question_decomposition,
  answer, answer_aliases, answerable`).
- `flashrag`: FlashRAG jsonl (`id, question, golden_answers, metadata?`), as on the
  `RUC-NLPIR/FlashRAG_datasets` hub repository.
- `searchr1`: Search-R1 / verl parquet (`id?, question, golden_answers?, data_source, prompt,
  reward_model {ground_truth {target}}, extra_info`).
- `nq_open`: NQ-open jsonl (`question, answer [..]`); ids are line numbers.

Gold annotations per format:

- HotpotQA: `gold_titles` are the supporting-fact titles (first-mention order), `gold_docs` the ids of
  those paragraphs, `gold_entities` the titles plus the answer (a yes/no answer is not an entity),
  `hops` is 2.
- 2Wiki: as HotpotQA, with the evidence triples' subjects and objects between the titles and the answer;
  `hops` is the number of supporting titles.
- MuSiQue: `gold_docs` are the supporting paragraphs in decomposition order, `gold_entities` the
  decomposition answers (the last is the final answer), `hops` the number of decomposition steps,
  `answers` the answer and its aliases.
- FlashRAG: PopQA rows (metadata with `subj` and `obj`) get `(subj, obj)`; rows whose metadata carries
  HotpotQA/2Wiki supporting facts or a MuSiQue decomposition get the same entities and titles as the
  official files (no context corpus: FlashRAG's files do not always carry the paragraphs); every other
  row (NQ, TriviaQA, Bamboogle...) gets its first, canonical answer.
- Search-R1 and NQ-open: the first answer.

Context corpus (HotpotQA, 2Wiki, MuSiQue): one `Document` per distinct (title, text) paragraph of the
loaded records, in order of first appearance. A document's id is its title when the title has a single
text among the loaded records, else the first text keeps the title and later ones get `"Title (2)"`,
`"Title (3)"`..., skipping any id that is another paragraph's title. Ids therefore depend only on the
file and `limit`.

Record positions in error messages: `line N` (1-based) for jsonl, the 0-based list index for JSON lists,
`row N` (0-based) for parquet.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import json
import logging
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple, get_args

from searchgym.corpus import Corpus, Document
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError, DataError, DataNotFoundError

logger = logging.getLogger(__name__)

DatasetFormat = Literal["auto", "hotpotqa", "hotpotqa_hf", "2wiki", "musique", "flashrag", "searchr1", "nq_open"]
FORMATS: tuple[str, ...] = tuple(f for f in get_args(DatasetFormat) if f != "auto")
"""Every concrete format name `load_dataset_file` accepts (besides "auto")."""

_FORMAT_HELP = (
    "hotpotqa (_id, question, answer, supporting_facts, context as lists), "
    "hotpotqa_hf (id, question, answer, supporting_facts and context as {title: [...]} columns), "
    "2wiki (hotpotqa plus evidences), "
    "musique (id, paragraphs, question_decomposition, answer, answer_aliases), "
    "flashrag (id, question, golden_answers, metadata), "
    "searchr1 (question, data_source, prompt, reward_model, extra_info), "
    "nq_open (question, answer)"
)
_YES_NO = frozenset({"yes", "no"})
_SOURCE_PREFIXES = (
    ("popqa", "popqa"),
    ("trivia", "triviaqa"),
    ("bamboogle", "bamboogle"),
    ("hotpot", "hotpotqa"),
    ("2wiki", "2wiki"),
    ("musique", "musique"),
    ("nq", "nq"),
)
_WS = re.compile(r"[ \t\n\r]*")
_SURROGATE = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True)
class QADataset:
    """The records of one benchmark file, and the corpus of its own context paragraphs if it has any."""

    records: tuple[QARecord, ...]
    """The records in file order (the first `limit` of them when a limit was given)."""
    corpus: Corpus | None
    """One document per distinct context paragraph (HotpotQA, 2Wiki, MuSiQue), else None."""
    path: str
    """The file the records were read from."""
    format: str
    """The format the file was read as (one of `FORMATS`)."""
    sha256: str
    """SHA-256 of the whole file's bytes, to pin results to the exact data."""


class _RecordError(Exception):
    """A record does not have the shape its format requires; the driver adds the file and position."""


class _Raw(NamedTuple):
    where: str
    """The record's position, as error messages show it."""
    number: int
    """Line number (jsonl), list index (JSON) or row (parquet)."""
    value: Any


@dataclass
class _Draft:
    record: QARecord
    gold_keys: tuple[tuple[str, str], ...] = ()
    """(title, text) of the supporting paragraphs; mapped to document ids once all records are read."""


@dataclass
class _ParseContext:
    """What a record parser needs besides the record: where it is and the shared context corpus."""

    path: Path
    source: str | None
    default_source: str
    paragraphs: _ContextCorpusBuilder | None
    seen_ids: set[str] = field(default_factory=set)
    number: int = 0

    def source_for(self, data_source: str | None = None) -> str:
        if self.source is not None:
            return self.source
        if data_source:
            return _guess_source(data_source) or data_source
        return self.default_source


class _ContextCorpusBuilder:
    """Collects distinct (title, text) paragraphs across records and assigns them deterministic ids."""

    def __init__(self) -> None:
        self._texts: dict[str, dict[str, None]] = {}
        self._order: dict[tuple[str, str], None] = {}

    def add(self, title: str, text: str) -> tuple[str, str]:
        key = (title, text)
        if key not in self._order:
            self._order[key] = None
            self._texts.setdefault(title, {})[text] = None
        return key

    def build(self, name: str) -> tuple[Corpus, dict[tuple[str, str], str]]:
        ids = self._assign_ids()
        docs = [Document(ids[key], key[0], key[1]) for key in self._order]
        return Corpus(docs, name=name), ids

    def _assign_ids(self) -> dict[tuple[str, str], str]:
        # Every plain title is reserved so that a numbered id never shadows a real title such as "X (2)".
        taken = set(self._texts)
        by_title: dict[tuple[str, str], str] = {}
        for title, texts in self._texts.items():
            first, *others = texts
            by_title[(title, first)] = title
            n = 2
            for text in others:
                while f"{title} ({n})" in taken:
                    n += 1
                doc_id = f"{title} ({n})"
                taken.add(doc_id)
                by_title[(title, text)] = doc_id
        return by_title


# --------------------------------------------------------------------------------------- public API


def load_dataset_file(
    path: str | Path,
    *,
    format: DatasetFormat = "auto",
    source: str | None = None,
    limit: int | None = None,
) -> QADataset:
    """Read a QA benchmark file.

    `format="auto"` detects the format from the extension and the first record's keys. `source` sets
    every record's `source` (default: the dataset the format implies, the Search-R1 `data_source`, or
    for FlashRAG a dataset name found in the path). `limit` keeps only the first `limit` records; jsonl
    and parquet files are then read no further.

    Raises DataNotFoundError if the file does not exist, DataError (naming the file and the record) if it
    cannot be read as the format, ConfigError for an invalid argument.
    """
    _check_arguments(format, source, limit)
    file = _check_path(path)
    digest = _sha256(file)
    with closing(_iter_raw(file)) as raws:
        first = next(raws, None)
        if first is None:
            raise DataError("the file holds no records", path=file)
        fmt = format if format != "auto" else _detect_format(first, file)
        drafts, builder = _parse_all(chain([first], raws), fmt, file, source, limit)
    corpus, records = _finish(drafts, builder, file)
    logger.debug("loaded %d %s records from %s", len(records), fmt, file)
    return QADataset(records=records, corpus=corpus, path=str(file), format=fmt, sha256=digest)


def load_records(
    path: str | Path,
    *,
    format: DatasetFormat = "auto",
    source: str | None = None,
    limit: int | None = None,
) -> list[QARecord]:
    """The records of `load_dataset_file(path, ...)`, without the corpus."""
    return list(load_dataset_file(path, format=format, source=source, limit=limit).records)


# ------------------------------------------------------------------------------------ arguments, driver


def _check_path(path: str | Path) -> Path:
    file = Path(path)
    if not file.exists():
        raise DataNotFoundError("no such file", path=file)
    if not file.is_file():
        raise DataError("not a regular file (a dataset is one file)", path=file)
    return file


def _check_arguments(format: str, source: str | None, limit: int | None) -> None:
    if format != "auto" and format not in FORMATS:
        raise ConfigError(f"format={format!r} is not supported; use 'auto' or one of {', '.join(FORMATS)}")
    if source is not None and not isinstance(source, str):
        raise ConfigError(f"source must be a string or None, got {type(source).__name__}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be a non-negative integer or None, got {limit!r}")


def _sha256(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _parse_all(
    raws: Iterator[_Raw], fmt: str, file: Path, source: str | None, limit: int | None
) -> tuple[list[_Draft], _ContextCorpusBuilder | None]:
    parser = _PARSERS[fmt]
    builder = _ContextCorpusBuilder() if fmt in _CONTEXT_FORMATS else None
    ctx = _ParseContext(path=file, source=source, default_source=_default_source(fmt, file), paragraphs=builder)
    drafts: list[_Draft] = []
    labels: dict[str, str] = {}
    # islice stops pulling from the reader once `limit` records are in, so the rest is never read.
    for raw in islice(raws, limit):
        label = _label(raw)
        draft = _parse_one(parser, raw, label, fmt, ctx)
        rid = draft.record.id
        if rid in labels:
            raise DataError(
                f"duplicate record id {rid!r} (first seen at record {labels[rid]})", path=file, record=label
            )
        labels[rid] = label
        ctx.seen_ids.add(rid)
        drafts.append(draft)
    return drafts, builder


def _parse_one(
    parser: Callable[[Mapping[str, Any], _ParseContext], _Draft], raw: _Raw, label: str, fmt: str, ctx: _ParseContext
) -> _Draft:
    if not isinstance(raw.value, Mapping):
        raise DataError(f"expected a JSON object, got {_type_name(raw.value)}", path=ctx.path, record=label)
    ctx.number = raw.number
    try:
        return parser(raw.value, ctx)
    except _RecordError as exc:
        raise DataError(f"{exc} (reading as format {fmt!r})", path=ctx.path, record=label) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A safety net: the parsers validate what they read, so reaching this is a loader bug, but the
        # caller still learns which record triggered it.
        raise DataError(
            f"unexpected record structure for format {fmt!r}: {type(exc).__name__}: {exc}", path=ctx.path, record=label
        ) from exc


def _label(raw: _Raw) -> str:
    value = raw.value
    if isinstance(value, Mapping):
        rid = value.get("_id", value.get("id"))
        if isinstance(rid, (str, int)) and not isinstance(rid, bool):
            return f"{raw.where} (id {rid!r})"
    return raw.where


def _finish(
    drafts: list[_Draft], builder: _ContextCorpusBuilder | None, file: Path
) -> tuple[Corpus | None, tuple[QARecord, ...]]:
    """Build the context corpus and point each record's gold_docs at its document ids."""
    if builder is None:
        return None, tuple(d.record for d in drafts)
    corpus, ids = builder.build(name=f"{file.name}:context")
    records = tuple(replace(d.record, gold_docs=tuple(ids[key] for key in d.gold_keys)) for d in drafts)
    return corpus, records


# ------------------------------------------------------------------------------------------- readers


def _iter_raw(file: Path) -> Iterator[_Raw]:
    kind = _container_kind(file)
    if kind == "parquet":
        return _iter_parquet(file)
    if _first_significant_byte(file) == b"[":
        return _iter_json_array(file)
    return _iter_json_lines(file)


def _is_gzip(file: Path) -> bool:
    return file.name.lower().endswith(".gz")


def _inner_suffix(file: Path) -> str:
    name = file.name.lower()
    name = name.removesuffix(".gz")
    return Path(name).suffix


def _container_kind(file: Path) -> str:
    suffix = _inner_suffix(file)
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".json", ".jsonl", ".ndjson"):
        return "json"
    head = _read_head(file, 4)
    if head == b"PAR1":
        return "parquet"
    if _first_significant_byte(file) in (b"[", b"{"):
        return "json"
    raise DataError(
        f"unsupported file type {suffix or '(no extension)'!r}: expected .json, .jsonl or .parquet, optionally .gz",
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


def _iter_json_lines(file: Path) -> Iterator[_Raw]:
    try:
        with _open_binary(file) as fh:
            for lineno, line in enumerate(fh, 1):
                raw = _decode_json_line(file, lineno, line)
                if raw is not None:
                    yield raw
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read the file (truncated or corrupt compressed data?): {exc}", path=file) from exc


def _decode_json_line(file: Path, lineno: int, line: bytes) -> _Raw | None:
    where = f"at line {lineno}"
    if lineno == 1:
        line = line.removeprefix(codecs.BOM_UTF8)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            _not_utf8_message(line[exc.start : exc.start + 1], f"column {exc.start + 1}"), path=file, record=where
        ) from None
    if not text.strip():
        return None
    try:
        return _Raw(where, lineno, json.loads(text))
    except json.JSONDecodeError as exc:
        hint = (
            " (the line is cut short: is the file truncated?)"
            if not line.endswith(b"\n") or exc.pos >= len(text.rstrip())
            else ""
        )
        raise DataError(
            f"invalid JSON at column {exc.colno}: {exc.msg}{hint}; each line must hold one JSON object",
            path=file,
            record=where,
        ) from None


def _not_utf8_message(bad: bytes, position: str) -> str:
    return (
        f"not valid UTF-8 (byte {bad!r} at {position}); dataset files must be UTF-8: "
        "re-encode the file, e.g. `iconv -f latin1 -t utf-8`"
    )


def _read_all_bytes(file: Path) -> bytes:
    try:
        with _open_binary(file) as fh:
            return fh.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read the file (truncated or corrupt compressed data?): {exc}", path=file) from exc


def _read_all_text(file: Path) -> str:
    data = _read_all_bytes(file)
    # surrogateescape keeps undecodable bytes as lone surrogates so that the record holding them can be
    # named once the list has been split into records.
    return data.removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="surrogateescape")


def _iter_json_array(file: Path) -> Iterator[_Raw]:
    text = _read_all_text(file)
    bad = _SURROGATE.search(text)
    bad_pos = bad.start() if bad else None
    for index, value, start, end in _scan_json_array(text, file):
        if bad_pos is not None and start <= bad_pos < end:
            line = text.count("\n", 0, bad_pos) + 1
            raw_byte = text[bad_pos].encode("utf-8", "surrogateescape")
            raise DataError(_not_utf8_message(raw_byte, f"line {line}"), path=file, record=index)
        yield _Raw(str(index), index, value)


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


def _check_array_end(text: str, pos: int, file: Path) -> None:
    rest = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    if rest != len(text):
        line = text.count("\n", 0, rest) + 1
        raise DataError(f"unexpected data after the closing ']' of the record list, at line {line}", path=file)


def _iter_parquet(file: Path) -> Iterator[_Raw]:
    pq = _import_parquet(file)
    source: Any = io.BytesIO(_read_all_bytes(file)) if _is_gzip(file) else file
    try:
        reader = pq.ParquetFile(source)
    except Exception as exc:  # pyarrow raises ArrowInvalid/OSError subclasses; none should escape raw
        raise DataError(f"not a readable parquet file: {exc}", path=file) from exc
    row = 0
    try:
        for batch in reader.iter_batches(batch_size=1024):
            for value in batch.to_pylist():
                yield _Raw(f"at row {row}", row, value)
                row += 1
    except (OSError, ValueError, TypeError, NotImplementedError) as exc:  # pyarrow's errors derive from these
        raise DataError(
            f"cannot read the parquet data near row {row}: {exc}", path=file, record=f"at row {row}"
        ) from exc


def _import_parquet(file: Path) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DataError("reading parquet needs pyarrow: pip install pyarrow", path=file) from exc
    return pq


# ---------------------------------------------------------------------------------- format detection


def _detect_format(first: _Raw, file: Path) -> str:
    value = first.value
    if not isinstance(value, Mapping):
        raise DataError(
            f"expected each record to be a JSON object, got {_type_name(value)}", path=file, record=_label(first)
        )
    keys = set(value)
    fmt = _format_from_keys(value, keys)
    if fmt is None:
        raise DataError(
            f"cannot tell the dataset format: the first record has keys {sorted(keys)}; "
            f"supported formats: {_FORMAT_HELP}. Pass format=... if the file is one of these.",
            path=file,
            record=_label(first),
        )
    return fmt


def _format_from_keys(value: Mapping[str, Any], keys: set[str]) -> str | None:
    if {"paragraphs", "question_decomposition"} <= keys:
        return "musique"
    if {"context", "supporting_facts"} <= keys:
        if "evidences" in keys:
            return "2wiki"
        return "hotpotqa_hf" if isinstance(value["context"], Mapping) else "hotpotqa"
    if "reward_model" in keys or {"prompt", "data_source"} <= keys:
        return "searchr1"
    if "golden_answers" in keys:
        return "flashrag"
    if {"question", "answer"} <= keys:
        return "nq_open"
    return None


def _default_source(fmt: str, file: Path) -> str:
    implied = {
        "hotpotqa": "hotpotqa",
        "hotpotqa_hf": "hotpotqa",
        "2wiki": "2wiki",
        "musique": "musique",
        "nq_open": "nq",
    }
    if fmt in implied:
        return implied[fmt]
    guessed = _guess_source_from_path(file)
    if guessed is None and fmt == "flashrag":
        logger.info("%s: no dataset name in the path; records get source=''. Pass source=... to set it.", file)
    return guessed or ""


def _guess_source_from_path(file: Path) -> str | None:
    # The file name is the most specific part (popqa_test.jsonl); FlashRAG's layout puts it in the
    # folder instead (popqa/test.jsonl). Folders further up name the user's machine, not the data.
    for part in (file.name, file.parent.name):
        found = _guess_source(part)
        if found:
            return found
    return None


def _guess_source(text: str) -> str | None:
    for token in re.split(r"[^a-z0-9]+", text.lower()):
        for prefix, name in _SOURCE_PREFIXES:
            if token.startswith(prefix):
                return name
    return None


# ------------------------------------------------------------------------------------ field accessors


def _type_name(value: Any) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
    }
    if value is None:
        return "null"
    return names.get(type(value), type(value).__name__)


def _field(raw: Mapping[str, Any], key: str, where: str = "") -> Any:
    if key not in raw or raw[key] is None:
        inside = f" in {where}" if where else ""
        raise _RecordError(f"missing required field {key!r}{inside} (found keys: {sorted(raw)})")
    return raw[key]


def _as_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _RecordError(f"field {name!r}: expected a string, got {_type_name(value)}")
    return value


def _as_id(value: Any, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _RecordError(f"field {name!r}: expected a string or integer id, got {_type_name(value)}")
    text = str(value).strip()
    if not text:
        raise _RecordError(f"field {name!r}: empty id")
    return text


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _RecordError(f"field {name!r}: expected an integer, got {_type_name(value)}")
    return value


def _as_list(value: Any, name: str) -> list[Any]:
    # numpy arrays (pandas-written parquet) and tuples count as lists; strings and mappings do not.
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise _RecordError(f"field {name!r}: expected a list, got {_type_name(value)}")
    return list(value)


def _as_mapping(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _RecordError(f"field {name!r}: expected an object, got {_type_name(value)}")
    return value


def _as_str_list(value: Any, name: str, *, allow_scalar: bool = False) -> list[str]:
    if allow_scalar and isinstance(value, str):
        return [value]
    items = _as_list(value, name)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _RecordError(f"field {name!r}: expected a list of strings, item {i} is {_type_name(item)}")
    return items


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    """Strip, drop empties and duplicates, keep first-seen order."""
    seen: dict[str, None] = {}
    for item in items:
        text = item.strip()
        if text:
            seen.setdefault(text, None)
    return tuple(seen)


def _extra(raw: Mapping[str, Any], consumed: Iterable[str]) -> dict[str, Any]:
    skip = set(consumed)
    return {k: v for k, v in raw.items() if k not in skip}


def _make_record(**fields: Any) -> QARecord:
    try:
        return QARecord(**fields)
    except ValueError as exc:
        raise _RecordError(str(exc)) from None


def _answer_entity(answer: str) -> tuple[str, ...]:
    # yes/no answers to comparison questions name no entity.
    return () if answer.strip().lower() in _YES_NO else (answer,)


# ------------------------------------------------------------------------ HotpotQA and 2Wiki parsers


def _join_hotpotqa(sentences: list[str]) -> str:
    # HotpotQA's sentences keep the text's own separators (every sentence after the first starts with a
    # space, except where the splitter cut inside a quotation), so plain concatenation restores the
    # paragraph exactly.
    return "".join(sentences).strip()


def _join_adaptive(sentences: list[str]) -> str:
    # Files that keep the separators (as HotpotQA does) are concatenated; files with bare sentences get
    # a single space between them.
    if any(s[:1].isspace() for s in sentences[1:]):
        return "".join(sentences).strip()
    return " ".join(s.strip() for s in sentences if s.strip())


def _supporting_facts(value: Any) -> list[tuple[str, int]]:
    if isinstance(value, Mapping):
        titles = _as_str_list(_field(value, "title", "supporting_facts"), "supporting_facts.title")
        sent_ids = _as_list(_field(value, "sent_id", "supporting_facts"), "supporting_facts.sent_id")
        if len(titles) != len(sent_ids):
            raise _RecordError(f"supporting_facts: {len(titles)} titles but {len(sent_ids)} sent_ids")
        return [(t, _as_int(s, "supporting_facts.sent_id")) for t, s in zip(titles, sent_ids, strict=True)]
    facts = []
    for i, fact in enumerate(_as_list(value, "supporting_facts")):
        pair = _as_list(fact, f"supporting_facts[{i}]")
        if len(pair) != 2:
            raise _RecordError(f"field 'supporting_facts[{i}]': expected [title, sent_id], got {len(pair)} items")
        facts.append((_as_str(pair[0], f"supporting_facts[{i}][0]"), _as_int(pair[1], f"supporting_facts[{i}][1]")))
    return facts


def _context_paragraphs(value: Any, join: Callable[[list[str]], str]) -> list[tuple[str, str]]:
    """(title, text) per context paragraph, from the list form or the column form of `context`."""
    if isinstance(value, Mapping):
        titles = _as_str_list(_field(value, "title", "context"), "context.title")
        body_key = "sentences" if "sentences" in value else "content"
        bodies = _as_list(_field(value, body_key, "context"), f"context.{body_key}")
        if len(titles) != len(bodies):
            raise _RecordError(f"context: {len(titles)} titles but {len(bodies)} {body_key}")
        pairs = list(zip(titles, bodies, strict=True))
    else:
        pairs = []
        for i, item in enumerate(_as_list(value, "context")):
            pair = _as_list(item, f"context[{i}]")
            if len(pair) != 2:
                raise _RecordError(f"field 'context[{i}]': expected [title, [sentences]], got {len(pair)} items")
            pairs.append((_as_str(pair[0], f"context[{i}][0]"), pair[1]))
    paragraphs = []
    for i, (title, body) in enumerate(pairs):
        if not title.strip():
            raise _RecordError(f"context paragraph {i} has an empty title")
        sentences = _as_str_list(body, f"context[{i}] sentences", allow_scalar=True)
        paragraphs.append((title, join(sentences)))
    return paragraphs


def _add_context(ctx: _ParseContext, paragraphs: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Register the paragraphs in the shared corpus; map each title to its (first) paragraph's key."""
    assert ctx.paragraphs is not None
    by_title: dict[str, tuple[str, str]] = {}
    for title, text in paragraphs:
        by_title.setdefault(title, ctx.paragraphs.add(title, text))
    return by_title


def _gold_keys_for_titles(
    titles: Iterable[str], by_title: Mapping[str, tuple[str, str]], ctx: _ParseContext
) -> tuple[tuple[str, str], ...]:
    keys = []
    for title in titles:
        if title in by_title:
            keys.append(by_title[title])
        else:
            logger.warning(
                "%s record %d: supporting title %r is not among its context paragraphs; left out of gold_docs",
                ctx.path,
                ctx.number,
                title,
            )
    return tuple(keys)


def _hotpot_common(
    raw: Mapping[str, Any], ctx: _ParseContext, join: Callable[[list[str]], str]
) -> tuple[str, str, str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    rid = _as_id(raw["_id"] if "_id" in raw else _field(raw, "id"), "_id")
    question = _as_str(_field(raw, "question"), "question")
    answer = _as_str(_field(raw, "answer"), "answer")
    facts = _supporting_facts(_field(raw, "supporting_facts"))
    by_title = _add_context(ctx, _context_paragraphs(_field(raw, "context"), join))
    titles = _unique(title for title, _ in facts)
    return rid, question, answer, titles, _gold_keys_for_titles(titles, by_title, ctx)


def _parse_hotpotqa(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid, question, answer, titles, gold_keys = _hotpot_common(raw, ctx, _join_hotpotqa)
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique([answer]),
        gold_entities=_unique([*titles, *_answer_entity(answer)]),
        gold_titles=titles,
        hops=2,
        source=ctx.source_for(),
        metadata=_extra(raw, ("_id", "id", "question", "answer", "context")),
    )
    return _Draft(record, gold_keys)


def _evidence_entities(value: Any) -> list[str]:
    """Subjects and objects of 2Wiki's evidence triples, from the list form or the column form."""
    if isinstance(value, Mapping):
        subjects = _as_str_list(value.get("fact", []), "evidences.fact")
        objects = _as_str_list(value.get("entity", []), "evidences.entity")
        if len(subjects) != len(objects):
            raise _RecordError(f"evidences: {len(subjects)} facts but {len(objects)} entities")
        return [e for pair in zip(subjects, objects, strict=True) for e in pair]
    entities = []
    for i, triple in enumerate(_as_list(value, "evidences")):
        items = _as_list(triple, f"evidences[{i}]")
        if len(items) != 3:
            raise _RecordError(f"field 'evidences[{i}]': expected [subject, relation, object], got {len(items)} items")
        entities += [_as_str(items[0], f"evidences[{i}][0]"), _as_str(items[2], f"evidences[{i}][2]")]
    return entities


def _parse_2wiki(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid, question, answer, titles, gold_keys = _hotpot_common(raw, ctx, _join_adaptive)
    evidence = _evidence_entities(raw.get("evidences") or [])
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique([answer]),
        gold_entities=_unique([*titles, *evidence, *_answer_entity(answer)]),
        gold_titles=titles,
        hops=len(titles) or None,
        source=ctx.source_for(),
        metadata=_extra(raw, ("_id", "id", "question", "answer", "context")),
    )
    return _Draft(record, gold_keys)


# ----------------------------------------------------------------------------------- MuSiQue parser


def _musique_paragraphs(value: Any) -> list[tuple[int, str, str, bool]]:
    paragraphs = []
    for i, item in enumerate(_as_list(value, "paragraphs")):
        para = _as_mapping(item, f"paragraphs[{i}]")
        idx = _as_int(para.get("idx", i), f"paragraphs[{i}].idx")
        title = _as_str(_field(para, "title", f"paragraphs[{i}]"), f"paragraphs[{i}].title")
        if not title.strip():
            raise _RecordError(f"paragraphs[{i}] has an empty title")
        text = _as_str(_field(para, "paragraph_text", f"paragraphs[{i}]"), f"paragraphs[{i}].paragraph_text")
        paragraphs.append((idx, title, text.strip(), bool(para.get("is_supporting", False))))
    return paragraphs


def _decomposition(value: Any) -> list[Mapping[str, Any]]:
    return [
        _as_mapping(step, f"question_decomposition[{i}]")
        for i, step in enumerate(_as_list(value, "question_decomposition"))
    ]


def _decomposition_answers(steps: list[Mapping[str, Any]]) -> list[str]:
    return [
        _as_str(step["answer"], f"question_decomposition[{i}].answer")
        for i, step in enumerate(steps)
        if step.get("answer") is not None
    ]


def _chain_entities(step_answers: Iterable[str], answer: str) -> tuple[str, ...]:
    """Decomposition answers, deduplicated, with the final answer last."""
    entities = [e for e in _unique(step_answers) if e != answer.strip()]
    return _unique([*entities, answer])


def _musique_gold_keys(
    steps: list[Mapping[str, Any]], paragraphs: list[tuple[int, str, str, bool]], keys: dict[int, tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    ordered: list[tuple[str, str]] = []
    for i, step in enumerate(steps):
        support = step.get("paragraph_support_idx")
        if support is None:
            continue
        support = _as_int(support, f"question_decomposition[{i}].paragraph_support_idx")
        if support not in keys:
            raise _RecordError(
                f"question_decomposition[{i}].paragraph_support_idx {support} matches no paragraph "
                f"(paragraph idx values: {sorted(keys)})"
            )
        ordered.append(keys[support])
    # Supporting paragraphs that no step points at still count, after the decomposition's own.
    ordered += [keys[idx] for idx, _, _, supporting in paragraphs if supporting]
    return tuple(dict.fromkeys(ordered))


def _parse_musique(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    assert ctx.paragraphs is not None
    rid = _as_id(_field(raw, "id"), "id")
    question = _as_str(_field(raw, "question"), "question")
    answer = _as_str(_field(raw, "answer"), "answer")
    aliases = _as_str_list(raw.get("answer_aliases") or [], "answer_aliases")
    paragraphs = _musique_paragraphs(_field(raw, "paragraphs"))
    keys = {idx: ctx.paragraphs.add(title, text) for idx, title, text, _ in paragraphs}
    steps = _decomposition(_field(raw, "question_decomposition"))
    gold_keys = _musique_gold_keys(steps, paragraphs, keys)
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique([answer, *aliases]),
        gold_entities=_chain_entities(_decomposition_answers(steps), answer),
        gold_titles=_unique(title for title, _ in gold_keys),
        hops=len(steps) or None,
        source=ctx.source_for(),
        metadata=_extra(raw, ("id", "question", "answer", "answer_aliases", "paragraphs")),
    )
    return _Draft(record, gold_keys)


# ------------------------------------------------------------------- FlashRAG, Search-R1, NQ-open


def _popqa_entities(meta: Mapping[str, Any]) -> tuple[str, ...] | None:
    subj, obj = meta.get("subj"), meta.get("obj")
    if isinstance(subj, str) and isinstance(obj, str) and subj.strip() and obj.strip():
        return _unique([subj, obj])
    return None


def _multihop_annotations(
    meta: Mapping[str, Any], answer: str, source: str
) -> tuple[tuple[str, ...], tuple[str, ...], int | None] | None:
    """(gold_entities, gold_titles, hops) from a FlashRAG multi-hop row's metadata, or None.

    FlashRAG keeps the original datasets' annotations in `metadata`: HotpotQA's and 2Wiki's
    `supporting_facts` (and 2Wiki's `evidences`), MuSiQue's `question_decomposition`.
    """
    if "question_decomposition" in meta:
        steps = _decomposition(meta["question_decomposition"])
        titles = _unique(
            step["support_paragraph"]["title"]
            for step in steps
            if isinstance(step.get("support_paragraph"), Mapping)
            and isinstance(step["support_paragraph"].get("title"), str)
        )
        return _chain_entities(_decomposition_answers(steps), answer), titles, len(steps) or None
    if "supporting_facts" in meta:
        titles = _unique(title for title, _ in _supporting_facts(meta["supporting_facts"]))
        evidence = _evidence_entities(meta.get("evidences") or [])
        hops = 2 if source == "hotpotqa" else (len(titles) or None)
        return _unique([*titles, *evidence, *_answer_entity(answer)]), titles, hops
    return None


def _flashrag_annotations(
    meta: Mapping[str, Any], answers: list[str], source: str
) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    popqa = _popqa_entities(meta)
    if popqa is not None:
        return popqa, (), None
    canonical = answers[0] if answers else ""
    try:
        multihop = _multihop_annotations(meta, canonical, source)
    except _RecordError as exc:
        # Metadata is carried along as found; a shape we do not know only costs the extra annotations.
        logger.debug("ignoring unrecognised multi-hop metadata: %s", exc)
        multihop = None
    if multihop is not None:
        return multihop
    return _unique([canonical]), (), None


def _parse_flashrag(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid = _as_id(raw["id"], "id") if raw.get("id") is not None else str(ctx.number)
    question = _as_str(_field(raw, "question"), "question")
    answers = _as_str_list(_field(raw, "golden_answers"), "golden_answers", allow_scalar=True)
    meta = _as_mapping(raw.get("metadata") or {}, "metadata")
    source = ctx.source_for()
    entities, titles, hops = _flashrag_annotations(meta, list(_unique(answers)), source)
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=_unique(answers),
        gold_entities=entities,
        gold_titles=titles,
        hops=hops,
        source=source,
        metadata={**_extra(raw, ("id", "question", "golden_answers", "metadata")), **meta},
    )
    return _Draft(record)


def _searchr1_answers(raw: Mapping[str, Any]) -> list[str]:
    reward = raw.get("reward_model")
    if isinstance(reward, Mapping) and reward.get("ground_truth") is not None:
        truth = reward["ground_truth"]
        if isinstance(truth, Mapping):
            return _as_str_list(
                _field(truth, "target", "reward_model.ground_truth"),
                "reward_model.ground_truth.target",
                allow_scalar=True,
            )
        return _as_str_list(truth, "reward_model.ground_truth", allow_scalar=True)
    if raw.get("golden_answers") is not None:
        return _as_str_list(raw["golden_answers"], "golden_answers", allow_scalar=True)
    raise _RecordError(
        f"no answers: expected reward_model.ground_truth.target or golden_answers (found keys: {sorted(raw)})"
    )


def _searchr1_id(raw: Mapping[str, Any], ctx: _ParseContext, source: str) -> str:
    extra = raw.get("extra_info")
    if raw.get("id") is not None:
        rid = _as_id(raw["id"], "id")
    elif isinstance(extra, Mapping) and extra.get("index") is not None:
        rid = _as_id(extra["index"], "extra_info.index")
    else:
        rid = str(ctx.number)
    # Search-R1's merged training files (nq + hotpotqa) repeat ids such as "train_0" across sources.
    if rid in ctx.seen_ids and source:
        rid = f"{source}/{rid}"
    return rid


def _parse_searchr1(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    data_source = raw.get("data_source")
    source = ctx.source_for(data_source if isinstance(data_source, str) else None)
    question = _as_str(_field(raw, "question"), "question")
    answers = _unique(_searchr1_answers(raw))
    record = _make_record(
        id=_searchr1_id(raw, ctx, source),
        question=question.strip(),
        answers=answers,
        gold_entities=answers[:1],
        source=source,
        # The prompt is the question rendered in Search-R1's template; it is dropped to keep memory
        # proportional to the questions.
        metadata=_extra(raw, ("id", "question", "golden_answers", "reward_model", "prompt")),
    )
    return _Draft(record)


def _parse_nq_open(raw: Mapping[str, Any], ctx: _ParseContext) -> _Draft:
    rid = _as_id(raw["id"], "id") if raw.get("id") is not None else str(ctx.number)
    question = _as_str(_field(raw, "question"), "question")
    answers = _unique(_as_str_list(_field(raw, "answer"), "answer", allow_scalar=True))
    record = _make_record(
        id=rid,
        question=question.strip(),
        answers=answers,
        gold_entities=answers[:1],
        source=ctx.source_for(),
        metadata=_extra(raw, ("id", "question", "answer")),
    )
    return _Draft(record)


_PARSERS: dict[str, Callable[[Mapping[str, Any], _ParseContext], _Draft]] = {
    "hotpotqa": _parse_hotpotqa,
    "hotpotqa_hf": _parse_hotpotqa,
    "2wiki": _parse_2wiki,
    "musique": _parse_musique,
    "flashrag": _parse_flashrag,
    "searchr1": _parse_searchr1,
    "nq_open": _parse_nq_open,
}
_CONTEXT_FORMATS = frozenset({"hotpotqa", "hotpotqa_hf", "2wiki", "musique"})
