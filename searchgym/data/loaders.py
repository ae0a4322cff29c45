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
  Face exports it (`question, question_id, answer {value, aliases}`), Bamboogle's CSV (`Question, Answer`),
  StrategyQA-style files whose answer is a boolean.
- `kilt`: KILT's task files (`id, input, output [{answer, provenance}]`), see `searchgym.data.kilt`.
- `beir`: a BEIR folder (`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`), see `searchgym.data.beir`.

Containers: jsonl, a JSON list, parquet, TSV or CSV (with a header line), each optionally `.gz`.
Detection looks at the first record's keys. The specific formats (all but `flashrag` and `nq_open`) win
over the generic ones that their rows also fit; a record that fits two formats of the same kind is an
error listing both, never a guess. In a TSV or CSV export the list and mapping columns of the format are
read back from their printed cells (JSON, Python reprs, NumPy prints; `searchgym.data.cells`), or the
record is refused.

Answers: a string, a list of strings, or a boolean, which becomes `yes` (`no`) with `true` (`false`) as
an alias. Where a Search-R1 / verl row's ground truth is one string and the row also lists its answers
one by one, the list wins (the string is often the list joined by commas).

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
`row N` (0-based) for parquet. An error in a record the file ends inside says the file looks truncated;
with `on_error="raise"` (the default) an error in one record says how to skip such records instead.
Warnings about many records come once per file, with a count.

The loader is split across modules: `readers` and `delimited` turn a file's container into raw records,
`cells` reads printed cells back, `formats` names the formats and detects them, `parsers`,
`flat_parsers` and `kilt` (with the helpers in `fields`) turn each raw record into a `QARecord`, `beir`
reads a BEIR folder, `dataset` holds what they return, and this module ties them together and builds
the context corpus.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from dataclasses import replace
from itertools import chain, islice
from pathlib import Path
from typing import Any

from searchgym.corpus import Corpus
from searchgym.data.beir import load_beir_folder
from searchgym.data.cells import decode_row
from searchgym.data.dataset import (
    ContextCorpusBuilder,
    OnError,
    QADataset,
    check_common_arguments,
    report_skipped,
    sha256_of,
)
from searchgym.corpus.io import file_kind
from searchgym.data.fields import RecordShapeError, type_name
from searchgym.data.flat_parsers import parse_flashrag, parse_nq_open, parse_popqa, parse_searchr1
from searchgym.data.formats import FORMATS, DatasetFormat, detect_format, implied_source, source_from_path
from searchgym.data.kilt import parse_kilt
from searchgym.data.parsers import DraftRecord, ParseContext, parse_2wiki, parse_hotpotqa, parse_musique
from searchgym.data.readers import (
    SKIP_HINT,
    TRUNCATED,
    RawRecord,
    Unreadable,
    container_kind,
    iter_raw_records,
    record_label,
)
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError, DataError, DataNotFoundError

__all__ = ["FORMATS", "ContextCorpusBuilder", "OnError", "QADataset", "load_dataset_file", "load_records"]

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
    "kilt": parse_kilt,
}
_CONTEXT_FORMATS = frozenset({"hotpotqa", "hotpotqa_hf", "2wiki", "musique"})


# --------------------------------------------------------------------------------------- public API


def load_dataset_file(
    path: str | Path,
    *,
    format: DatasetFormat = "auto",
    source: str | None = None,
    limit: int | None = None,
    on_error: OnError = "raise",
    split: str | None = None,
) -> QADataset:
    """Read a QA benchmark file, or a BEIR folder.

    `format="auto"` detects the format from the extension and the first record's keys (a folder is read
    as BEIR's layout). `source` sets every record's `source` (default: the dataset the format implies, the
    Search-R1 `data_source`, or for FlashRAG and KILT a dataset name found in the path). `limit` keeps only
    the first `limit` records; jsonl and parquet files are then read no further. `on_error="skip"` leaves
    out the records that cannot be read (a jsonl line that is not JSON, a TSV/CSV row with the wrong
    number of fields, a missing or mistyped field, an empty question, no answer, a duplicate id) and logs
    one warning with their count and the first few; a broken JSON list or parquet file still raises, as
    nothing after the break can be located. `split` picks a BEIR folder's `qrels/<split>.tsv` (a single
    file has no splits).

    Raises DataNotFoundError if the file does not exist, DataError (naming the file and the record) if it
    cannot be read as the format, ConfigError for an invalid argument.
    """
    _check_arguments(format, source, limit, on_error, split)
    file = _check_path(path)
    if file.is_dir():
        if format not in ("auto", "beir"):
            raise ConfigError(f"{file} is a folder, which is read as a BEIR dataset; format={format!r} reads one file")
        return load_beir_folder(file, split=split, source=source, limit=limit, on_error=on_error)
    if format == "beir":
        raise DataError("format='beir' reads a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): pass the "
                        "folder, not one of its files", path=file)
    if split is not None:
        raise ConfigError(
            f"split={split!r} picks the qrels file of a BEIR folder; {file} is a single file with no splits"
        )
    digest = sha256_of(file)
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
    split: str | None = None,
) -> list[QARecord]:
    """The records of `load_dataset_file(path, ...)`, without the corpus."""
    loaded = load_dataset_file(path, format=format, source=source, limit=limit, on_error=on_error, split=split)
    return list(loaded.records)


# ------------------------------------------------------------------------------------ arguments, driver


def _check_path(path: str | Path) -> Path:
    file = Path(path)
    if not file.exists():
        raise DataNotFoundError("no such file" + (" (a broken symbolic link)" if file.is_symlink() else ""), path=file)
    if not file.is_file() and not file.is_dir():
        raise DataError(f"is {file_kind(file)}, not a regular file: a dataset is one file (or a BEIR folder), give its path",
                        path=file)
    return file


def _check_arguments(format: str, source: str | None, limit: int | None, on_error: str, split: str | None) -> None:
    check_common_arguments(source, limit, on_error)
    if format != "auto" and format not in FORMATS:
        raise ConfigError(f"format={format!r} is not supported; use 'auto' or one of {', '.join(FORMATS)}")
    if split is not None and (not isinstance(split, str) or not split.strip()):
        raise ConfigError(f"split must be a non-empty string or None, got {split!r}")


def _parse_all(
    raws: Iterator[RawRecord], fmt: str, file: Path, source: str | None, limit: int | None, on_error: str
) -> tuple[list[DraftRecord], ContextCorpusBuilder | None, int]:
    parser = _PARSERS[fmt]
    builder = ContextCorpusBuilder() if fmt in _CONTEXT_FORMATS else None
    ctx = ParseContext(path=file, source=source, default_source=implied_source(fmt, file), paragraphs=builder,
                       named_dataset=source_from_path(file))
    # Every value of a TSV or CSV file is text: the format's list and mapping cells are read back first.
    delimited = container_kind(file) in ("tsv", "csv")
    hint = "" if on_error == "skip" else SKIP_HINT
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
            draft = _parse_one(parser, raw, label, fmt, ctx, delimited, hint)
            rid = draft.record.id
            if rid in labels:
                raise DataError(
                    f"duplicate record id {rid!r} (first seen at record {labels[rid]}){hint}", path=file, record=label
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
    report_skipped(file, skipped, kept, repr(fmt))
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
    if ctx.missing_titles:
        logger.warning(
            "%s: %d supporting titles are not among their records' context paragraphs (the first: %s); they stay "
            "in gold_titles, which is what a separate corpus (corpus_path) is matched by, but have no gold_docs "
            "in the file's own paragraphs",
            file, len(ctx.missing_titles), ", ".join(ctx.missing_titles[:3]),
        )


def _parse_one(
    parser: Callable[[Mapping[str, Any], ParseContext], DraftRecord],
    raw: RawRecord,
    label: str,
    fmt: str,
    ctx: ParseContext,
    delimited: bool,
    hint: str,
) -> DraftRecord:
    cut = f" ({TRUNCATED})" if raw.cut else ""
    if not isinstance(raw.value, Mapping):
        raise DataError(f"expected a JSON object, got {type_name(raw.value)}{cut}{hint}", path=ctx.path, record=label)
    ctx.number = raw.number
    try:
        return parser(decode_row(raw.value, fmt) if delimited else raw.value, ctx)
    except RecordShapeError as exc:
        raise DataError(f"{exc} (reading as format {fmt!r}){cut}{hint}", path=ctx.path, record=label) from None
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
