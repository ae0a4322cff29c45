"""BEIR datasets as questions with gold documents.

A BEIR folder holds `corpus.jsonl` (`_id, title, text`), `queries.jsonl` (`_id, text, metadata?`) and
`qrels/<split>.tsv` (a `query-id<TAB>corpus-id<TAB>score` header, then one judgment per line); each may
be gzipped. The questions are the queries the split's qrels judge, in `queries.jsonl` order:

- `gold_docs`: the judged documents with score > 0, in qrels order; `doc_relevance` every judgment of the
  query (document id -> score), for graded rewards such as nDCG;
- `answers`: the query's `metadata.answer` or `metadata.answers` where BEIR has them, else none: such a
  query is scored by the documents the agent finds (`answer_reward="doc_recall"` or `"doc_ndcg"`), not by
  an answer;
- no gold titles or entities: BEIR judges documents by id, so the corpus searched must be the folder's
  own (`QADataset.corpus_path`, which the environments load when no corpus is given) or one with its ids.

A query whose judgments all score 0 has nothing to find and is left out, with one warning that counts
such queries; so are judgments of queries that `queries.jsonl` lacks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from searchgym.data.dataset import OnError, QADataset, report_skipped, sha256_of
from searchgym.data.fields import (
    RecordShapeError,
    as_answer_list,
    as_id,
    as_mapping,
    as_str,
    make_record,
    type_name,
    unique_texts,
)
from searchgym.data.formats import implied_source, source_from_path
from searchgym.data.readers import SKIP_HINT, RawRecord, Unreadable, iter_raw_records, record_label
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError, DataError, DataNotFoundError

logger = logging.getLogger("searchgym.data.loaders")

_QUERY_ID = ("query-id", "query_id", "qid")
_CORPUS_ID = ("corpus-id", "corpus_id", "doc_id", "docid", "pid")
_SCORE = ("score", "relevance")
_LAYOUT = "a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv"


def find_file(folder: Path, name: str) -> Path | None:
    """`folder/name`, or its `.gz`, or None."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def qrels_file(folder: Path, split: str | None) -> Path:
    """The qrels file of `split`; without a split, the only one, else `test`'s."""
    qrels = folder / "qrels"
    found = sorted(p for p in qrels.glob("*.tsv*") if p.name.endswith((".tsv", ".tsv.gz"))) if qrels.is_dir() else []
    splits = {p.name.removesuffix(".gz").removesuffix(".tsv"): p for p in found}
    if not splits:
        raise DataNotFoundError(f"no qrels/<split>.tsv file: {_LAYOUT}", path=folder)
    if split is None:
        if len(splits) == 1:
            return next(iter(splits.values()))
        if "test" in splits:
            return splits["test"]
        raise ConfigError(f"{folder} has the qrels of splits {sorted(splits)}: pass split= one of them")
    if split not in splits:
        raise DataNotFoundError(f"no qrels/{split}.tsv; the folder's splits are {sorted(splits)}", path=folder)
    return splits[split]


def load_beir_folder(
    folder: Path, *, split: str | None, source: str | None, limit: int | None, on_error: OnError
) -> QADataset:
    """The questions of a BEIR folder's `split` (see the module docstring)."""
    queries = find_file(folder, "queries.jsonl")
    if queries is None:
        raise DataNotFoundError(f"no queries.jsonl: {_LAYOUT}; a dataset is one file or such a folder", path=folder)
    qrels = qrels_file(folder, split)
    bad_judgments: list[str] = []
    judged = read_qrels(qrels, on_error, bad_judgments)
    report_skipped(qrels, bad_judgments, sum(map(len, judged.values())), "BEIR judgments")
    name = source_from_path(folder)
    bad_queries: list[str] = []
    source = source or implied_source("beir", folder)
    records, unjudged = _records(queries, judged, source, limit, on_error, bad_queries)
    report_skipped(queries, bad_queries, len(records), "BEIR queries")
    if unjudged:
        logger.warning("%s: %d queries are judged in %s but have no document with score > 0; they are left out",
                       folder, len(unjudged), qrels.name)
    corpus = find_file(folder, "corpus.jsonl")
    if not records:
        raise DataError(f"none of the queries has a judged document with score > 0 in {qrels.name}", path=folder)
    return QADataset(
        records=tuple(records),
        corpus=None,
        path=str(folder),
        format="beir",
        sha256=sha256_of(queries, qrels),
        datasets={name or "": len(records)},
        skipped=len(bad_judgments) + len(bad_queries),
        corpus_path=None if corpus is None else str(corpus),
    )


def read_qrels(file: Path, on_error: OnError, skipped: list[str]) -> dict[str, dict[str, float]]:
    """Each judged query's {document id: score}, in file order."""
    judged: dict[str, dict[str, float]] = {}
    with closing(iter_raw_records(file, skip_bad_lines=on_error == "skip")) as rows:
        for raw in rows:
            if isinstance(raw.value, Unreadable):
                skipped.append(raw.value.message)
                continue
            try:
                query, doc, score = _judgment(raw.value)
            except RecordShapeError as exc:
                error = DataError(f"{exc}{'' if on_error == 'skip' else SKIP_HINT}", path=file, record=raw.where)
                if on_error == "raise":
                    raise error from None
                skipped.append(str(error))
                continue
            judged.setdefault(query, {})[doc] = score
    return judged


def _judgment(row: Mapping[str, Any]) -> tuple[str, str, float]:
    values = []
    for names in (_QUERY_ID, _CORPUS_ID, _SCORE):
        key = next((k for k in names if k in row), None)
        if key is None:
            raise RecordShapeError(
                f"a qrels file needs the header line 'query-id<TAB>corpus-id<TAB>score'; found columns {sorted(row)}"
            )
        values.append((key, row[key]))
    (qkey, query), (dkey, doc), (skey, score) = values
    try:
        number = float(score)
    except ValueError:
        raise RecordShapeError(f"field {skey!r}: expected a number, got {score!r}") from None
    return as_id(query, qkey), as_id(doc, dkey), number


def _records(
    file: Path, judged: Mapping[str, Mapping[str, float]], source: str, limit: int | None, on_error: OnError,
    skipped: list[str],
) -> tuple[list[QARecord], list[str]]:
    """The judged queries as records, and the ids of those with nothing relevant to find."""
    records: list[QARecord] = []
    unjudged: list[str] = []
    seen: dict[str, str] = {}
    for raw in _raw_queries(file, on_error, skipped):
        if limit is not None and len(records) >= limit:
            break
        try:
            record = _record(raw, judged, source)
            if isinstance(record, QARecord) and record.id in seen:
                raise RecordShapeError(f"duplicate query id {record.id!r} (first seen at record {seen[record.id]})")
        except RecordShapeError as exc:
            hint = "" if on_error == "skip" else SKIP_HINT
            error = DataError(f"{exc} (reading BEIR queries){hint}", path=file, record=record_label(raw))
            if on_error == "raise":
                raise error from None
            skipped.append(str(error))
            continue
        if record is None:
            continue
        if isinstance(record, str):
            unjudged.append(record)
            continue
        seen[record.id] = record_label(raw)
        records.append(record)
    found = set(seen) | set(unjudged)
    missing = [q for q in judged if q not in found]
    if missing and limit is None:
        logger.warning("%s: %d judged queries are not in the file, so their judgments are unused (the first: %s)",
                       file, len(missing), ", ".join(map(repr, missing[:3])))
    return records, unjudged


def _raw_queries(file: Path, on_error: OnError, skipped: list[str]) -> Iterator[RawRecord]:
    with closing(iter_raw_records(file, skip_bad_lines=on_error == "skip")) as raws:
        for raw in raws:
            if isinstance(raw.value, Unreadable):
                skipped.append(raw.value.message)
            else:
                yield raw


def _record(raw: RawRecord, judged: Mapping[str, Mapping[str, float]], source: str) -> QARecord | str | None:
    """The query as a record; None when the split does not judge it, its id when no judged document
    scores above 0."""
    value = raw.value
    if not isinstance(value, Mapping):
        raise RecordShapeError(f"expected a JSON object, got {type_name(value)}")
    if value.get("_id") is None:
        raise RecordShapeError(f"missing required field '_id' (found keys: {sorted(value)})")
    qid = as_id(value["_id"], "_id")
    if qid not in judged:
        return None
    if value.get("text") is None:
        raise RecordShapeError(f"missing required field 'text' (found keys: {sorted(value)})")
    relevance = dict(judged[qid])
    gold_docs = tuple(doc for doc, score in relevance.items() if score > 0)
    if not gold_docs:
        return qid
    meta = as_mapping(value.get("metadata") or {}, "metadata")
    answers = meta.get("answers", meta.get("answer"))
    return make_record(
        id=qid,
        question=as_str(value["text"], "text").strip(),
        answers=() if answers is None else unique_texts(as_answer_list(answers, "metadata.answer")),
        gold_docs=gold_docs,
        doc_relevance=relevance,
        source=source,
        metadata={k: v for k, v in value.items() if k not in ("_id", "text")},
    )
