"""`QADataset`, what a question loader returns, and what the loaders of files and of BEIR folders share:
the context corpus builder, argument checks, the file digest and the warning for skipped records."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from searchgym.corpus import Corpus, Document
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError

# Messages keep the logger they had before the loader was split into modules.
logger = logging.getLogger("searchgym.data.loaders")

OnError = Literal["raise", "skip"]
"""What a loader does with a record it cannot read: raise a `DataError` naming it, or leave it out and
log one warning that counts the records left out and names the first few."""


@dataclass(frozen=True)
class QADataset:
    """The records of one benchmark file (or BEIR folder), and the corpus of its own context paragraphs if
    it has any."""

    records: tuple[QARecord, ...]
    """The records in file order (the first `limit` of them when a limit was given)."""
    corpus: Corpus | None
    """One document per distinct context paragraph (HotpotQA, 2Wiki, MuSiQue), else None."""
    path: str
    """The file (or folder) the records were read from."""
    format: str
    """The format the file was read as (one of `FORMATS`)."""
    sha256: str
    """SHA-256 of the whole file's bytes (of a BEIR folder: of its queries and qrels files' bytes), to pin
    results to the exact data."""
    datasets: Mapping[str, int]
    """Records per benchmark their own content names (`formats.record_dataset`); `""` counts those
    whose content names none (a question with answers says nothing)."""
    skipped: int = 0
    """Records left out because they could not be read (only with `on_error="skip"`)."""
    corpus_path: str | None = None
    """A corpus file that comes with the questions but is not read by the loader (a BEIR folder's
    `corpus.jsonl`): the environments load it when no `corpus_path` of their own is given."""


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


def check_common_arguments(source: str | None, limit: int | None, on_error: str) -> None:
    """`ConfigError` for a `source`, `limit` or `on_error` that no loader accepts."""
    if on_error not in get_args(OnError):
        raise ConfigError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if source is not None and not isinstance(source, str):
        raise ConfigError(f"source must be a string or None, got {type(source).__name__}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be a non-negative integer or None, got {limit!r}")


def sha256_of(*files: Path) -> str:
    """SHA-256 over the bytes of `files`, in order."""
    h = hashlib.sha256()
    for file in files:
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def report_skipped(file: Path, skipped: list[str], kept: int, what: str) -> None:
    """The one warning for the records `on_error="skip"` left out: how many, and the first three."""
    if skipped:
        logger.warning(
            "%s: skipped %d of %d records that cannot be read as %s (on_error='skip'); the first: %s",
            file, len(skipped), len(skipped) + kept, what, " | ".join(skipped[:3]),
        )
