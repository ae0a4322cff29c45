"""Bad input on every input surface ends in a normal outcome or a typed error, never a crash or a hang.

The strategies and harnesses are `tools.fuzz`'s (which runs them with many more examples and prints
the counts); here each runs with few examples and hypothesis shrinks any crash to a small input.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time

import pytest
from hypothesis import given, settings

from tools import fuzz, fuzz_verdicts
from searchgym.errors import ConfigError, DataError

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

FEW = settings(max_examples=60, **fuzz.FUZZ_SETTINGS)


@pytest.fixture(autouse=True)
def _quiet_loaders(caplog):
    # Fuzzed files make the loaders warn (e.g. a supporting title missing from the context); not checked here.
    caplog.set_level(logging.ERROR, logger="searchgym")


@pytest.fixture(scope="module")
def env_harness():
    harness = fuzz.EnvHarness()
    yield harness
    harness.close()


@pytest.fixture(scope="module")
def qa_harness(tmp_path_factory):
    return fuzz.qa_harness(tmp_path_factory.mktemp("qa"))


@pytest.fixture(scope="module")
def corpus_harness(tmp_path_factory):
    return fuzz.corpus_harness(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def server_harness():
    harness = fuzz.ServerHarness()
    yield harness
    harness.close()


def _no_crash(outcome: fuzz.Outcome) -> None:
    assert outcome.crash is None, outcome.crash


# ---------------------------------------------------------------------------------------------- the env


@FEW
@given(case=fuzz.env_cases())
def test_env_step_turns_any_text_into_an_observation(env_harness, case):
    _no_crash(env_harness.run(case))


@pytest.mark.parametrize(
    "grammar, action, kind",
    [
        ("tool_calls", '<tool_call>{"name": "answer", "arguments": {"answer": ' + "1" * 5000 + "}}</tool_call>", "invalid"),
        ("tool_calls", "<tool_call>" + "[" * 5000 + "</tool_call>", "invalid"),
        ("tool_calls", '<tool_call>{"name": "search", "arguments": {"query": "Tiber \\ud800"}}</tool_call>', "search"),
        ("tags", "<think>\ud800</think><search>Rome \udfff river</search>", "search"),
        ("tags", "<search>" * 20_000 + "Rome" + "</search>", "search"),
        ("tags", "<answer>\x00</answer>", "answer"),
        ("tags", None, "invalid"),
        ("tags", b"<search>Rome \xff</search>", "search"),
    ],
)
def test_env_cases_that_once_crashed_or_are_easy_to_get_wrong(env_harness, grammar, action, kind):
    env = env_harness.envs[grammar]
    env.reset()
    assert env_harness.run((grammar, action)) == fuzz.Outcome(f"observation:{kind}")


# ---------------------------------------------------------------------------------------- the data files


@FEW
@given(case=fuzz.qa_file_cases())
def test_qa_loaders_read_or_name_the_file_and_record(qa_harness, case):
    _no_crash(qa_harness.run(case))


@settings(max_examples=40, **fuzz.FUZZ_SETTINGS)
@given(case=fuzz.corpus_file_cases())
def test_corpus_loader_reads_or_names_the_file_and_record(corpus_harness, case):
    _no_crash(corpus_harness.run(case))


@pytest.mark.parametrize(
    "name, data, record",
    [
        ("big.jsonl", b'{"question": "q", "answer": [' + b"1" * 5000 + b"]}\n", "at line 1"),
        ("deep.jsonl", b'{"question": "q", "answer": ["a"]}\n{"question": ' + b"[" * 5000 + b"}\n", "at line 2"),
        ("deep.json", b'[{"question": "q", "answer": ["a"]}, ' + b"[" * 5000 + b"]", 1),
        ("surrogate.jsonl", b'{"question": "q \\ud800", "answer": ["a"]}\n', "at line 1"),
        ("utf16.jsonl", '{"question": "q", "answer": ["a"]}\n'.encode("utf-16"), "at line 1"),
        ("latin1.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": "café", "answer": ["a"]}\n'.encode("latin-1"),
         "at line 2"),
    ],
)
def test_qa_files_that_once_crashed_name_the_record(tmp_path, name, data, record):
    from searchgym.data import load_dataset_file

    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataError) as info:
        load_dataset_file(path)
    assert info.value.path == str(path) and info.value.record == record and str(info.value).startswith(str(path))


@pytest.mark.parametrize(
    "name, data, record, message",
    [
        ("big.jsonl", b'{"id": 1, "contents": ' + b"1" * 5000 + b"}\n", "line 1", "unreadable JSON"),
        ("deep.jsonl", b'{"id": 1, "text": "x"}\n{"id": ' + b"[" * 5000 + b"}\n", "line 2", "nested too deeply"),
        ("latin1.jsonl", '{"id": 1, "text": "x"}\n{"id": 2, "text": "café"}\n'.encode("latin-1"), "line 2", "UTF-8"),
        ("surrogate.jsonl", b'{"id": 1, "text": "x \\udc00"}\n', "line 1", "surrogate"),
        ("bool.jsonl", b'{"id": true, "text": "x"}\n', "line 1", "'id'"),
        ("latin1.tsv", "id\ttext\ttitle\n1\tx\tt\n2\tcafé\tt\n".encode("latin-1"), "line 3", "not UTF-8"),
        ("dup.tsv", b"id\ttext\ttitle\n1\tx\tt\n2\ty\tt\n1\tz\tt\n", "document 3", "duplicate document id"),
    ],
)
def test_corpus_files_that_once_crashed_name_the_record(tmp_path, name, data, record, message):
    from searchgym.corpus import load_corpus

    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataError, match=message) as info:
        load_corpus(path)
    assert info.value.path == str(path) and info.value.record == record


def test_file_harness_reports_untyped_errors_and_unnamed_records_as_crashes(tmp_path):
    """The harness itself can fail: a reader raising KeyError, or a DataError without the record."""

    def raising(path, **options):
        raise KeyError("context")

    def unnamed(path, **options):
        raise DataError("bad record", path=path)

    case = fuzz.FileCase(".jsonl", b"{}\n", record_level=True)
    assert fuzz.FileHarness(raising, "x", tmp_path).run(case).kind == "crash"
    assert "without its record" in fuzz.FileHarness(unnamed, "x", tmp_path).run(case).crash
    assert fuzz.FileHarness(unnamed, "x", tmp_path).run(fuzz.FileCase(".jsonl", b"", False)) == fuzz.Outcome("DataError")


def test_time_limit_interrupts_a_hang():
    started = time.monotonic()
    with pytest.raises(fuzz.InputHang), fuzz.time_limit(0.2):
        while True:
            pass
    assert time.monotonic() - started < 5


# -------------------------------------------------------------------------------------------- the server


@FEW
@given(case=fuzz.server_cases())
def test_server_answers_any_body_with_200_or_a_4xx_message(server_harness, case):
    _no_crash(server_harness.run(case))


@pytest.mark.parametrize(
    "body, status",
    [
        (b'{"queries": ["Rome"], "topk": ' + b"1" * 5000 + b"}", 422),  # was 500
        (b'{"queries": ' + b"[" * 5000 + b"}", 422),  # was 500
        (b'{"queries": ["\\ud800 Rome"], "topk": 2}', 200),
        (json.dumps({"queries": ["Rome"] * 33}).encode(), 413),  # max_queries 32
        (json.dumps({"queries": ["Rome"], "topk": 21}).encode(), 413),  # max_topk 20
        (json.dumps({"queries": ["a" * 501]}).encode(), 413),  # max_query_chars 500
        (b'{"queries": ["Rome"], ' + b" " * (64 * 1024) + b'"topk": 1}', 413),  # max_body_bytes 64 KiB
        ('{"queries": ["Rome"]}'.encode("utf-16"), 200),  # JSON may be UTF-16 (RFC 8259 readers detect it)
        (b"\xff\xfe\x00", 422),
        (b"", 422),
    ],
)
def test_server_cases_that_once_crashed_or_sit_on_a_cap(server_harness, body, status):
    outcome = server_harness.run(fuzz.HTTPCase(body))
    assert outcome == fuzz.Outcome(f"http {status}"), outcome


def test_server_encodes_documents_holding_lone_surrogates():
    """A corpus built in code may hold lone surrogates: the answer escapes them instead of failing with 500."""
    from searchgym.corpus import Corpus, Document
    from searchgym.retrieval import BM25Retriever
    from searchgym.retrieval.server import create_app

    retriever = BM25Retriever(Corpus([Document("s", "Odd \ud800", "Rome text \udcff")]), cache_dir=False)
    app = create_app(retriever, fuzz.fuzz_server_config())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)

    async def ask():
        client = httpx.AsyncClient(transport=transport, base_url="http://t", timeout=10)
        async with app.router.lifespan_context(app), client:
            return await client.post("/retrieve", json={"queries": ["Rome"], "topk": 1})

    response = asyncio.run(ask())
    assert response.status_code == 200
    assert json.loads(response.content)["result"][0][0] == {"id": "s", "contents": '"Odd \ud800"\nRome text \udcff'}


def test_http_outcome_flags_500s_and_silent_4xx():
    assert fuzz.http_outcome(500, b'{"detail": "x"}', b"{}").kind == "crash"
    assert fuzz.http_outcome(422, b'{"detail": ""}', b"{}").kind == "crash"
    assert fuzz.http_outcome(200, b'{"result": [[]]}', b'{"queries": ["a", "b"]}').kind == "crash"
    assert fuzz.http_outcome(200, b'{"result": [[], []]}', b'{"queries": ["a", "b"]}') == fuzz.Outcome("http 200")


def test_loopback_server_refuses_lying_and_oversized_bodies_without_hanging():
    """Over real sockets: a declared length over the cap is refused before any body arrives, a chunked body
    that grows past the cap is cut off with 413, and the server keeps answering afterwards."""
    from searchgym.corpus import Corpus
    from searchgym.retrieval import BM25Retriever
    from searchgym.retrieval.server import BackgroundServer

    retriever = BM25Retriever(Corpus(fuzz.FUZZ_DOCS), cache_dir=False)
    with BackgroundServer(retriever, fuzz.fuzz_server_config()) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000000000000\r\n\r\n")
            head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 413"), head

        def chunks():
            for _ in range(100):
                yield b" " * 4096

        with httpx.Client(timeout=10) as client:
            response = client.post(server.url, content=chunks())
            assert response.status_code == 413 and response.json()["detail"]
            for body in (b'{"queries": ["Rome"], "topk": ' + b"9" * 5000 + b"}", b'{"queries": [' * 3000):
                response = client.post(server.url, content=body)
                assert response.status_code == 422 and response.json()["detail"]
            assert client.post(server.url, json={"queries": ["Tiber river"], "topk": 1}).json()["result"][0][0]["id"] == "d1"


def test_server_caps_are_options_with_checked_values():
    from searchgym.retrieval.server import ServerConfig

    for name in ("max_topk", "max_queries", "max_query_chars", "max_body_bytes"):
        with pytest.raises(ConfigError, match=name):
            ServerConfig(**{name: 0})


@settings(max_examples=150, **fuzz.FUZZ_SETTINGS)
@given(case=fuzz_verdicts.verdict_cases())
def test_judge_replies_are_accepted_exactly_when_they_hold_one_honest_verdict(case):
    _no_crash(fuzz_verdicts.VerdictHarness().run(case))


def test_verdict_harness_flags_a_wrongly_accepted_verdict():
    good = '{"analysis": "a", "retrieval_reward": 1, "thinking_reward": 0}'
    harness = fuzz_verdicts.VerdictHarness()
    assert harness.run(fuzz_verdicts.VerdictCase(good, "", (1, 0), "none")).kind == "accepted"
    assert "accepted wrongly" in harness.run(fuzz_verdicts.VerdictCase(good, "", None, "dup")).crash
    assert "labels (1, 0)" in harness.run(fuzz_verdicts.VerdictCase(good, "", (0, 0), "none")).crash
    assert "valid verdict refused" in harness.run(fuzz_verdicts.VerdictCase("no", "", (0, 0), "none")).crash
