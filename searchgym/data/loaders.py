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

The loader is split across modules: `readers` turns a file's container into raw records, `formats` names
the formats and detects them, `parsers` (with the helpers in `fields`) turns each raw record into a
`QARecord`, and this module ties them together and builds the context corpus.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any

from searchgym.corpus import Corpus, Document
from searchgym.data.fields import _RecordError, _type_name
from searchgym.data.formats import FORMATS, DatasetFormat, _default_source, _detect_format
from searchgym.data.parsers import _CONTEXT_FORMATS, _PARSERS, _Draft, _ParseContext
from searchgym.data.readers import _iter_raw, _label, _Raw
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError, DataError, DataNotFoundError

logger = logging.getLogger(__name__)


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


def _finish(
    drafts: list[_Draft], builder: _ContextCorpusBuilder | None, file: Path
) -> tuple[Corpus | None, tuple[QARecord, ...]]:
    """Build the context corpus and point each record's gold_docs at its document ids."""
    if builder is None:
        return None, tuple(d.record for d in drafts)
    corpus, ids = builder.build(name=f"{file.name}:context")
    records = tuple(replace(d.record, gold_docs=tuple(ids[key] for key in d.gold_keys)) for d in drafts)
    return corpus, records
