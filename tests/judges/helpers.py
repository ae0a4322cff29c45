"""Hand-built records, documents and rounds shared by the judge tests."""

from __future__ import annotations

from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.judges.base import JudgeRequest, SearchRound
from tests.conftest import TEN_DOCS

DOCS = {d.id: d for d in TEN_DOCS}

# A two-hop bridge question: Italy -> Rome (d1) -> Tiber (d7).
BRIDGE = QARecord(
    "bridge", "Which river flows through the capital of Italy?", ("Tiber",),
    gold_entities=("Rome", "Tiber"), gold_docs=("d1", "d7"), gold_titles=("Rome", "Tiber"), hops=2, source="test",
)


def rnd(query: str, *doc_ids: str, thinking: str = "") -> SearchRound:
    return SearchRound(thinking=thinking, query=query, docs=tuple(DOCS[i] if isinstance(i, str) else i for i in doc_ids))


def req(record: QARecord, round_: SearchRound, *history: SearchRound, searchable: bool | None = True) -> JudgeRequest:
    return JudgeRequest(record=record, round=round_, history=tuple(history), turn=len(history), gold_docs_searchable=searchable)


def doc(doc_id: str, title: str, text: str) -> Document:
    return Document(doc_id, title, text)
