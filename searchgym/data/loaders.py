"""Read the public QA benchmark files into `QARecord`s, and their context paragraphs into a `Corpus`.

Supported formats (`format=` names), detected from the file extension (`.json`, `.jsonl`, `.parquet`,
each optionally `.gz`) and the first record's keys:

- `hotpotqa`: HotpotQA's official JSON list (`_id, question, answer, type, level,
  supporting_facts [[title, sent_id]], context [[title, [sentences]]]`).
- `hotpotqa_hf`: the Hugging Face `hotpot_qa` rows (jsonl or parquet), with `supporting_facts` and
  `context` stored column-wise (`{title: [...], sent_id: [...]}`, `{title: [...], sentences: [[...]]}`).
- `2wiki`: 2WikiMultihopQA's official JSON, HotpotQA's layout plus `evidences [[subject, relation, object]]`.
- `musique`: MuSiQue's official JSON list or jsonl (`id, paragraphs, question, question_decomposition,
  answer, answer_aliases, answerable`), and the question-only release without `paragraphs`.
- `popqa`: PopQA as its authors release it (`id, subj, prop, obj, ..., s_pop, o_pop, question,
  possible_answers` with the answers as a JSON-encoded list), in TSV, CSV, JSON or jsonl.
- `flashrag`: FlashRAG jsonl (`id, question, golden_answers, metadata?`), as on the
  `RUC-NLPIR/FlashRAG_datasets` hub repository.
- `searchr1`: Search-R1 / verl parquet (`id?, question?, golden_answers?, data_source, prompt,
  reward_model {ground_truth {target}}, extra_info`): the question is the `question` column, else
  `extra_info.question`, else the text after `Question:` in the prompt's user message.
- `nq_open`: question and answers only: NQ-open jsonl (`question, answer [..]`), TriviaQA as Hugging
  Face exports it (`question, question_id, answer {value, aliases}`), Bamboogle's CSV (`Question, Answer`).

Containers: jsonl, a JSON list, parquet, TSV or CSV (with a header line), each optionally `.gz`.
Detection looks at the first record's keys. The specific formats (all but `flashrag` and `nq_open`) win
over the generic ones that their rows also fit; a record that fits two formats of the same kind is an
error listing both, never a guess.

Ids: a record without one (`_id`, `id`, `question_id`, or Search-R1's `extra_info.index`) gets
`sha1:` and 12 hex digits of a hash of its question and answers, stable under reordering; the file gets
one warning with the count.

The benchmark each record belongs to, as far as its content says (`QADataset.datasets`), is what the
registered environments check a file against (`check_dataset`).

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
- PopQA's release: `(subj, obj)`; `answers` are `possible_answers`.
- MuSiQue without paragraphs: as MuSiQue, without `gold_docs` and `gold_titles`.

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
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, replace
from itertools import chain, islice
from pathlib import Path
from typing import Any, Literal, get_args

from searchgym.corpus import Corpus, Document
from searchgym.corpus.io import file_kind
from searchgym.data.fields import RecordShapeError, type_name
from searchgym.data.flat_parsers import parse_flashrag, parse_nq_open, parse_popqa, parse_searchr1
from searchgym.data.formats import FORMATS, DatasetFormat, detect_format, implied_source
from searchgym.data.parsers import DraftRecord, ParseContext, parse_2wiki, parse_hotpotqa, parse_musique
from searchgym.data.readers import RawRecord, Unreadable, iter_raw_records, record_label
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError, DataError, DataNotFoundError

logger = logging.getLogger(__name__)

_PARSERS: dict[str, Callable[[Mapping[str, Any], ParseContext], DraftRecord]] = {
    "hotpotqa": parse_hotpotqa,
    "hotpotqa_hf": parse_hotpotqa,
    "2wiki": parse_2wiki,
    "musique": parse_musique,
    "popqa": parse_popqa,
    "flashrag": parse_flashrag,
    "searchr1": parse_searchr1,
    "nq_open": parse_nq_open,
}
_CONTEXT_FORMATS = frozenset({"hotpotqa", "hotpotqa_hf", "2wiki", "musique"})
OnError = Literal["raise", "skip"]


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
    datasets: Mapping[str, int]
    """Records per benchmark their own content names (`formats.record_dataset`); `""` counts those
    whose content names none (a question with answers says nothing)."""
    skipped: int = 0
    """Records left out because they could not be read (only with `on_error="skip"`)."""


class ContextCorpusBuilder:
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

    @property
    def empty(self) -> bool:
        return not self._order

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
    on_error: OnError = "raise",
) -> QADataset:
    """Read a QA benchmark file.

    `format="auto"` detects the format from the extension and the first record's keys. `source` sets
    every record's `source` (default: the dataset the format implies, the Search-R1 `data_source`, or
    for FlashRAG a dataset name found in the path). `limit` keeps only the first `limit` records; jsonl
    and parquet files are then read no further. `on_error="skip"` leaves out the records that cannot be
    read (a jsonl line that is not JSON, a TSV/CSV row with the wrong number of fields, a missing or
    mistyped field, an empty question, no answer, a duplicate id) and logs one warning with their count
    and the first few; a broken JSON list or parquet file still raises, as nothing after the break can be
    located.

    Raises DataNotFoundError if the file does not exist, DataError (naming the file and the record) if it
    cannot be read as the format, ConfigError for an invalid argument.
    """
    _check_arguments(format, source, limit, on_error)
    file = _check_path(path)
    digest = _sha256(file)
    with closing(iter_raw_records(file, skip_bad_lines=on_error == "skip")) as raws:
        # Detection needs a readable record; unreadable ones before it are skipped (and counted) later.
        unreadable: list[RawRecord] = []
        first = next(raws, None)
        while first is not None and isinstance(first.value, Unreadable):
            unreadable.append(first)
            first = next(raws, None)
        if first is None:
            if unreadable:
                first_error = unreadable[0].value.message
                raise DataError(f"none of the file's {len(unreadable)} records can be read; the first: {first_error}", path=file)
            raise DataError("the file holds no records", path=file)
        fmt = format if format != "auto" else detect_format(first, file)
        drafts, builder, skipped = _parse_all(chain(unreadable, [first], raws), fmt, file, source, limit, on_error)
    corpus, records = _finish(drafts, builder, file)
    datasets = Counter(d.dataset or "" for d in drafts)
    logger.debug("loaded %d %s records from %s", len(records), fmt, file)
    return QADataset(
        records=records,
        corpus=corpus,
        path=str(file),
        format=fmt,
        sha256=digest,
        datasets=dict(datasets),
        skipped=skipped,
    )


def load_records(
    path: str | Path,
    *,
    format: DatasetFormat = "auto",
    source: str | None = None,
    limit: int | None = None,
    on_error: OnError = "raise",
) -> list[QARecord]:
    """The records of `load_dataset_file(path, ...)`, without the corpus."""
    return list(load_dataset_file(path, format=format, source=source, limit=limit, on_error=on_error).records)


# ------------------------------------------------------------------------------------ arguments, driver


def _check_path(path: str | Path) -> Path:
    file = Path(path)
    if not file.exists():
        raise DataNotFoundError("no such file" + (" (a broken symbolic link)" if file.is_symlink() else ""), path=file)
    if not file.is_file():
        raise DataError(f"is {file_kind(file)}, not a regular file: a dataset is one file, give its path", path=file)
    return file


def _check_arguments(format: str, source: str | None, limit: int | None, on_error: str) -> None:
    if on_error not in get_args(OnError):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
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
    raws: Iterator[RawRecord], fmt: str, file: Path, source: str | None, limit: int | None, on_error: str
) -> tuple[list[DraftRecord], ContextCorpusBuilder | None, int]:
    parser = _PARSERS[fmt]
    builder = ContextCorpusBuilder() if fmt in _CONTEXT_FORMATS else None
    ctx = ParseContext(path=file, source=source, default_source=implied_source(fmt, file), paragraphs=builder)
    drafts: list[DraftRecord] = []
    labels: dict[str, str] = {}
    skipped: list[str] = []
    # islice stops pulling from the reader once `limit` records are in, so the rest is never read.
    for raw in islice(raws, limit):
        if isinstance(raw.value, Unreadable):
            skipped.append(raw.value.message)
            continue
        label = record_label(raw)
        try:
            draft = _parse_one(parser, raw, label, fmt, ctx)
            rid = draft.record.id
            if rid in labels:
                raise DataError(
                    f"duplicate record id {rid!r} (first seen at record {labels[rid]})", path=file, record=label
                )
        except DataError as exc:
            if on_error == "raise":
                raise
            skipped.append(str(exc))
            continue
        labels[rid] = label
        ctx.seen_ids.add(rid)
        drafts.append(draft)
    _report(ctx, file, fmt, skipped, len(drafts))
    return drafts, builder, len(skipped)


def _report(ctx: ParseContext, file: Path, fmt: str, skipped: list[str], kept: int) -> None:
    """One warning per kind of loss or guess, with a count, instead of one per record (or none)."""
    if skipped:
        logger.warning(
            "%s: skipped %d of %d records that cannot be read as %r (on_error='skip'); the first: %s",
            file, len(skipped), len(skipped) + kept, fmt, " | ".join(skipped[:3]),
        )
    if ctx.derived_ids:
        logger.warning(
            "%s: %d records have no id; each gets 'sha1:' + a hash of its question and answers (stable when "
            "records are added or reordered)",
            file, ctx.derived_ids,
        )
    if ctx.lost_annotations:
        logger.warning(
            "%s: %d records carry multi-hop metadata of a shape not understood, so they have no gold titles "
            "and only the answer as gold entity (the metadata is kept as found); the first: %s",
            file, len(ctx.lost_annotations), ctx.lost_annotations[0],
        )


def _parse_one(
    parser: Callable[[Mapping[str, Any], ParseContext], DraftRecord],
    raw: RawRecord,
    label: str,
    fmt: str,
    ctx: ParseContext,
) -> DraftRecord:
    if not isinstance(raw.value, Mapping):
        raise DataError(f"expected a JSON object, got {type_name(raw.value)}", path=ctx.path, record=label)
    ctx.number = raw.number
    try:
        return parser(raw.value, ctx)
    except RecordShapeError as exc:
        raise DataError(f"{exc} (reading as format {fmt!r})", path=ctx.path, record=label) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A safety net: the parsers validate what they read, so reaching this is a loader bug, but the
        # caller still learns which record triggered it.
        raise DataError(
            f"unexpected record structure for format {fmt!r}: {type(exc).__name__}: {exc}", path=ctx.path, record=label
        ) from exc


def _finish(
    drafts: list[DraftRecord], builder: ContextCorpusBuilder | None, file: Path
) -> tuple[Corpus | None, tuple[QARecord, ...]]:
    """Build the context corpus and point each record's gold_docs at its document ids."""
    if builder is None or builder.empty:
        # A question-only file of a context format (MuSiQue without paragraphs) brings no corpus.
        return None, tuple(d.record for d in drafts)
    corpus, ids = builder.build(name=f"{file.name}:context")
    records = tuple(replace(d.record, gold_docs=tuple(ids[key] for key in d.gold_keys)) for d in drafts)
    return corpus, records
