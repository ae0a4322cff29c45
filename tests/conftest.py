"""Shared fixtures: a small real-text corpus and the location of the real data samples."""

from __future__ import annotations

import pytest

from searchgym.corpus import Corpus, Document
from searchgym.data.records import QARecord

TEN_DOCS = [
    Document("d0", "Paris", "Paris is the capital and most populous city of France, on the Seine."),
    Document("d1", "Rome", "Rome is the capital city of Italy and was the centre of the Roman Empire."),
    Document("d2", "Berlin", "Berlin is the capital and largest city of Germany by both area and population."),
    Document("d3", "Seine", "The Seine is a river in northern France that flows through Paris into the English Channel."),
    Document("d4", "Marie Curie", "Marie Curie was a physicist and chemist who conducted pioneering research on radioactivity in Paris."),
    Document("d5", "Radioactivity", "Radioactivity was discovered by Henri Becquerel in 1896 while studying uranium salts."),
    Document("d6", "Henri Becquerel", "Henri Becquerel was a French engineer and physicist, born in Paris in 1852."),
    Document("d7", "Tiber", "The Tiber is the third-longest river in Italy and flows through Rome."),
    Document("d8", "Spree", "The Spree is a river that flows through Berlin before joining the Havel."),
    Document("d9", "Nobel Prize in Physics", "The Nobel Prize in Physics 1903 was shared by Becquerel, Pierre Curie and Marie Curie."),
]


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_the_test_tmp(tmp_path_factory):
    """stable-baselines3 makes a log folder for every model it trains (`SB3-<time>` in the system's temp folder
    unless `SB3_LOGDIR` names one): keep them in pytest's own temp folder, not left behind in /tmp."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))
        yield


@pytest.fixture
def ten_doc_corpus() -> Corpus:
    return Corpus(TEN_DOCS, name="ten")


@pytest.fixture
def small_records() -> list[QARecord]:
    return [
        QARecord("q0", "Which river flows through the capital of Italy?", ("Tiber",), gold_entities=("Rome", "Tiber"), gold_docs=("d1", "d7"), hops=2, source="test"),
        QARecord("q1", "Who discovered radioactivity?", ("Henri Becquerel", "Becquerel"), gold_entities=("Henri Becquerel",), gold_docs=("d5",), hops=1, source="test"),
        QARecord("q2", "In which city was the discoverer of radioactivity born?", ("Paris",), gold_entities=("Henri Becquerel", "Paris"), gold_docs=("d5", "d6"), hops=2, source="test"),
    ]
