"""Any answer of a retrieval server ends `env.step` in an observation or a `RetrievalError`, never another
exception (`tools.fuzz_answers`; `python -m benchmarks.fuzz --surface answers` runs it with more
examples and prints the counts)."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings

pytest.importorskip("httpx")

from tools import fuzz, fuzz_answers  # noqa: E402
from tools.fuzz_answers import AnswerCase  # noqa: E402


@pytest.fixture(scope="module")
def harness():
    h = fuzz_answers.AnswerHarness()
    yield h
    h.close()


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.ERROR, logger="searchgym")


@settings(max_examples=80, **fuzz.FUZZ_SETTINGS)
@given(case=fuzz_answers.answer_cases())
def test_any_server_answer_ends_the_step_in_an_observation_or_a_retrieval_error(harness, case):
    outcome = harness.run(case)
    assert outcome.crash is None, outcome.crash


def _doc(score: str = "1.5", doc_id: str = '"d1"', title: str = '"Tiber"') -> bytes:
    return ('{"result": [[{"document": {"id": %s, "title": %s, "text": "The Tiber flows through Rome."}, "score": %s}]]}'
            % (doc_id, title, score)).encode()


@pytest.mark.parametrize("case, outcome", [
    # Each of these escaped env.step before as ValueError, RecursionError or OverflowError.
    (AnswerCase(200, _doc(score="1" * 5000)), "RetrievalAnswerError"),
    (AnswerCase(200, b'{"result": ' + b"[" * 5000 + b"]" * 5000 + b"}"), "RetrievalAnswerError"),
    (AnswerCase(200, _doc(doc_id="[" * 3000 + "]" * 3000)), "RetrievalAnswerError"),
    (AnswerCase(200, _doc(title="[" * 3000 + "]" * 3000)), "RetrievalAnswerError"),
    (AnswerCase(200, _doc(score='"1' + "0" * 400 + '"')), "RetrievalAnswerError"),  # a float past its range
    (AnswerCase(200, _doc(score="1e999")), "RetrievalAnswerError"),  # infinity, which sorted nowhere
    (AnswerCase(200, _doc(score="NaN")), "RetrievalAnswerError"),
    (AnswerCase(200, _doc(doc_id="true")), "RetrievalAnswerError"),
    (AnswerCase(200, b"\xff\xfe{}"), "RetrievalAnswerError"),
    (AnswerCase(503, b"", {"retry-after": "nan"}), "RetrievalError"),  # an unreadable Retry-After: a plain 503
    (AnswerCase(418, b"<html>"), "RetrievalError"),
    # Answers that are fine: ids as integers, scores as strings, a lone surrogate in the text.
    (AnswerCase(200, _doc(doc_id="7", score='"0.5"')), "observation:search"),
    (AnswerCase(200, b'{"result": [[{"id": "d1", "contents": "\\"Tiber\\"\\nRiver \\ud800 of Rome"}]]}'), "observation:search"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_answers_that_once_escaped_or_are_easy_to_get_wrong(harness, case, outcome):
    assert harness.run(case) == fuzz.Outcome(outcome)


def test_the_harness_reports_an_untyped_exception_as_a_crash(harness, monkeypatch):
    def broken(queries, k):
        raise ValueError("from inside the retriever")

    monkeypatch.setattr(harness.retriever, "search", broken)
    outcome = harness.run(AnswerCase(200, json.dumps({"result": [[]]}).encode()))
    assert outcome.kind == "crash" and "ValueError" in outcome.crash
