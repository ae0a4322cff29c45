"""Bad-input fuzzing: what every input surface does with input it was never meant to get.

Six surfaces, each driven by a hypothesis strategy (the tests in `tests/reliability/test_fuzz.py` run the
same strategies with few examples):

- `env`: `SearchQAEnv.step` with arbitrary agent text, in both grammars (tags, tool calls): random
  unicode, soups of grammar tags and JSON fragments, huge integers, deep nesting, lone surrogates, NULs,
  200k-character turns, and values that are not text at all.
- `qa_files`: `load_dataset_file` on files of every format (hotpotqa, hotpotqa_hf, 2wiki, musique,
  flashrag, searchr1, nq_open) in every container (jsonl, JSON list, parquet, each optionally gzipped),
  mutated: fields dropped or given wrong-typed values, huge records, duplicate ids, truncation,
  re-encoding (latin-1, cp1252, UTF-16, UTF-32), invalid UTF-8 bytes, binary garbage.
- `corpus_files`: `load_corpus` on corpus files (jsonl with `contents`, jsonl with `title`/`text`, DPR tsv),
  mutated the same ways.
- `verdicts`: `parse_reply` on adversarial judge replies (`benchmarks/fuzz_verdicts.py`): a wrongly
  accepted verdict or a refused valid one is a crash.
- `answers`: `SearchQAEnv.step` over an `HTTPRetriever` whose server answers anything
  (`benchmarks/fuzz_answers.py`): only the env's `RetrievalError` may come out of the step.
- `server`: `POST /retrieve` on the Search-R1-compatible server (the ASGI app through httpx): arbitrary
  JSON, wrong types, huge and negative `topk`, query lists over the cap, queries over the length cap,
  non-JSON and non-UTF-8 bodies, oversized bodies.

Each input ends in one outcome: normal (an observation, a dataset, a corpus, HTTP 200), a typed error
(`SearchGymError` subclasses by class name, HTTP 4xx by status) or a crash: any other exception, an HTTP
status outside 200/4xx, no answer within the time limit, or a broken contract (a data error that does not
name its file and record, a 4xx without a message, an observation that is not text, terminated and
truncated both true). Crashes must be 0.

    python -m benchmarks.fuzz [--examples 2000] [--surface env --surface server ...] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import logging
import math
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, get_args

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from searchgym.corpus import Corpus, Document
from searchgym.data.formats import FORMATS
from searchgym.data.records import QARecord
from searchgym.errors import DataError, SearchGymError
from searchgym.protocol import ActionKind

TIME_LIMIT_S = 10.0
"""Longest time one input may take before it counts as a hang."""

# --------------------------------------------------------------------------------------------- outcomes


class Outcome(NamedTuple):
    kind: str
    """`observation:search`, `dataset`, `DataError`, `http 413`, ... or `crash` for a crash."""
    crash: str | None = None
    """What went wrong, for a crash."""


class InputHang(BaseException):
    """Raised in the main thread when one input runs past its time limit. A BaseException, so that library
    code that catches `Exception` cannot swallow it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block with `InputHang` after `seconds` (main thread only; elsewhere a no-op).

    An outer timer (pytest-timeout's) is suspended and re-armed with what was left of it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _fire(signum, frame):
        raise InputHang(f"no outcome within {seconds:g} s")

    started = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, _fire)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:
            left = max(old_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def _crash(what: str) -> Outcome:
    return Outcome("crash", what)


def _describe_exception(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"


# ------------------------------------------------------------------------------------ JSON with raw tokens


class Raw(str):
    """A token written into JSON text verbatim: values `json.dumps` cannot produce or Python cannot read."""


RAW_TOKENS = (
    Raw("1" * 5000),  # over Python's 4300-digit limit for int parsing
    Raw("-" + "9" * 4400),
    Raw("[" * 5000 + "]" * 5000),  # deeper than the decoder's recursion limit
    Raw('{"a":' * 3000 + "0" + "}" * 3000),
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("1e999"),
    Raw('"\\ud800"'),  # lone surrogates, spelled as JSON escapes
    Raw('"x\\udfff y"'),
    Raw('"a\\u0000b"'),
)


def dumps(value: Any) -> str:
    """`json.dumps` that writes `Raw` tokens verbatim (ASCII output, so lone surrogates become escapes)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)  # NaN / Infinity, which Python's reader accepts
    return json.dumps(value)


def _has_raw(value: Any) -> bool:
    if isinstance(value, Raw):
        return True
    if isinstance(value, dict):
        return any(_has_raw(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_raw(v) for v in value)
    return False


def json_leaves() -> st.SearchStrategy:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=30),
        st.sampled_from(RAW_TOKENS),
    )


def json_values(max_leaves: int = 12) -> st.SearchStrategy:
    """Any JSON value, with raw tokens (huge integers, deep nesting, NaN, surrogate escapes) among the leaves."""
    return st.recursive(
        json_leaves(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def _paths(value: Any, prefix: tuple = (), depth: int = 3) -> list[tuple]:
    """Every path (keys and indexes) into a JSON value, down to `depth` levels."""
    found = [prefix] if prefix else []
    if depth == 0:
        return found
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, prefix + (k,), depth - 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, prefix + (i,), depth - 1)
    return found


def _set(value: Any, path: tuple, new: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


def _delete(value: Any, path: tuple) -> None:
    for step in path[:-1]:
        value = value[step]
    del value[path[-1]]


# -------------------------------------------------------------------------------------------- surface: env

_ANY_CHARACTER = st.one_of(st.characters(), st.characters(categories=["Cs"]))
"""Any code point, lone surrogates included (hypothesis leaves them out of text by default)."""

_TAG_FRAGMENTS = [
    "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<information>", "</information>",
    "<tool_call>", "</tool_call>", "<tool_response>", "<search><search>", "</search></search>", "<", ">", "</",
    '{"name": "search", "arguments": {"query": ', '{"name": "answer", "arguments": {"answer": ', '"}}',
    '{"name": "search", "arguments": {"query": "Tiber river"}}', '{"name": "answer", "arguments": {"answer": "Rome"}}',
    '{"name": "answer", "arguments": {"answer": 1e999}}', '{"name": "answer", "arguments": {"answer": NaN}}',
    '{"name": ["search"], "arguments": null}', "{", "}", "[", "]", '"', "\\", ":", ",", "null", "true",
    "Rome", "Tiber", "capital of Italy", " ", "\n", "\t", "\x00", "\ud800", "\udfff", "\u202e", "\ufeff", "🜂",
    *RAW_TOKENS,
]


def _fragment_text(max_size: int = 12) -> st.SearchStrategy:
    return st.lists(st.one_of(st.sampled_from(_TAG_FRAGMENTS), st.text(_ANY_CHARACTER, max_size=6)),
                    max_size=max_size).map("".join)


@st.composite
def _well_formed_turn(draw) -> str:
    """A turn in one of the grammars' shapes, with fuzzed contents (so searches and answers do happen)."""
    think = draw(st.one_of(st.just(""), _fragment_text().map(lambda t: f"<think>{t}</think>")))
    content = draw(st.one_of(st.sampled_from(["Rome", "Tiber river", "capital of Italy", "Spree"]), _fragment_text(6)))
    shape = draw(st.sampled_from(["search", "answer", "tool_search", "tool_answer"]))
    if shape in ("search", "answer"):
        turn = f"<{shape}>{content}</{shape}>"
    else:
        name, key = ("search", "query") if shape == "tool_search" else ("answer", "answer")
        arguments = draw(st.one_of(st.just(content), st.sampled_from(RAW_TOKENS), json_values(4)))
        turn = "<tool_call>" + dumps({"name": name, "arguments": {key: arguments}}) + "</tool_call>"
    return think + turn + draw(_fragment_text(4))


def agent_actions() -> st.SearchStrategy:
    """What a policy might emit for one turn, and a few things it never should (non-text values)."""
    long = st.builds(lambda piece, n: piece * n, st.sampled_from(_TAG_FRAGMENTS[:12] + ["x", "<search>x", "é "]),
                     st.integers(1_000, 40_000))
    not_text = st.one_of(st.none(), st.integers(), st.binary(max_size=40), st.lists(st.text(max_size=5), max_size=3))
    return st.one_of(_well_formed_turn(), _well_formed_turn(), _fragment_text(40), st.text(_ANY_CHARACTER, max_size=60),
                     long, not_text)


def env_cases() -> st.SearchStrategy:
    """(grammar, action) pairs."""
    return st.tuples(st.sampled_from(["tags", "tool_calls"]), agent_actions())


FUZZ_DOCS = [
    Document("d0", "Rome", "Rome is the capital city of Italy and was the centre of the Roman Empire."),
    Document("d1", "Tiber", "The Tiber is the third-longest river in Italy and flows through Rome."),
    Document("d2", "Paris", "Paris is the capital and most populous city of France, on the Seine."),
    Document("d3", "Seine", "The Seine is a river in northern France that flows through Paris."),
    Document("d4", "Berlin", "Berlin is the capital and largest city of Germany."),
    Document("d5", "Spree", "The Spree is a river that flows through Berlin before joining the Havel."),
]
FUZZ_RECORDS = [
    QARecord("q0", "Which river flows through the capital of Italy?", ("Tiber",), gold_entities=("Rome", "Tiber"),
             gold_docs=("d0", "d1"), hops=2, source="fuzz"),
    QARecord("q1", "Which river flows through Berlin?", ("Spree",), gold_entities=("Spree",), gold_docs=("d5",),
             hops=1, source="fuzz"),
]


class EnvHarness:
    """One env per grammar over a six-document corpus, BM25 and the gold judge; an episode is started
    whenever the last one ended."""

    def __init__(self) -> None:
        from searchgym.envs import SearchQAEnv

        corpus = Corpus(FUZZ_DOCS, name="fuzz")
        self.envs = {
            name: SearchQAEnv(FUZZ_RECORDS, corpus, action_format=name, judge="gold", top_k=2, candidates=4,
                              max_turns=4, cache_dir=False)
            for name in ("tags", "tool_calls")
        }
        # One real search and answer first: BM25's numba kernels compile on the first search (seconds).
        for name, env in self.envs.items():
            env.reset(seed=0)
            search, answer = ("<search>Rome river</search>", "<answer>Tiber</answer>") if name == "tags" else (
                '<tool_call>{"name": "search", "arguments": {"query": "Rome river"}}</tool_call>',
                '<tool_call>{"name": "answer", "arguments": {"answer": "Tiber"}}</tool_call>')
            env.step(search)
            env.step(answer)

    def run(self, case: tuple[str, Any]) -> Outcome:
        grammar, action = case
        env = self.envs[grammar]
        if env.done:
            env.reset()
        try:
            with time_limit(TIME_LIMIT_S):
                obs, reward, terminated, truncated, info = env.step(action)
        except InputHang as e:
            return _crash(str(e))
        except Exception as e:  # noqa: BLE001 - any exception from step is a crash: bad text is a normal turn
            return _crash(_describe_exception(e))
        problem = _env_contract(obs, reward, terminated, truncated, info)
        if problem:
            return _crash(f"contract: {problem}")
        return Outcome(f"observation:{info['action']}")

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def _env_contract(obs: Any, reward: Any, terminated: Any, truncated: Any, info: dict) -> str | None:
    if not isinstance(obs, str):
        return f"observation is {type(obs).__name__}, not text"
    if not isinstance(reward, float) or not math.isfinite(reward):
        return f"reward {reward!r} is not a finite float"
    if not isinstance(terminated, bool) or not isinstance(truncated, bool) or (terminated and truncated):
        return f"terminated={terminated!r}, truncated={truncated!r}"
    if info.get("action") not in get_args(ActionKind):
        return f"info['action'] is {info.get('action')!r}"
    if info["invalid_action"] != (info["action"] == "invalid"):
        return "info['invalid_action'] disagrees with info['action']"
    if info["action"] == "invalid" and not obs.strip():
        return "an invalid action got no explanation"
    if (terminated or truncated) and "episode" not in info:
        return "the last step has no episode summary"
    return None


# ------------------------------------------------------------------------------------ surface: QA files


def _qa_record(fmt: str, i: int, q: str, a: str, t1: str, t2: str, s: str) -> dict[str, Any]:
    """A valid record of format `fmt` built around the drawn strings."""
    if fmt in ("hotpotqa", "2wiki"):
        rec: dict[str, Any] = {
            "_id": f"r{i}", "question": q, "answer": a, "type": "bridge", "level": "easy",
            "supporting_facts": [[t1, 0], [t2, 0]], "context": [[t1, [s, " More."]], [t2, [a]]],
        }
        if fmt == "2wiki":
            rec["evidences"] = [[t1, "located in", t2]]
        return rec
    if fmt == "hotpotqa_hf":
        return {
            "id": f"r{i}", "question": q, "answer": a, "type": "comparison", "level": "hard",
            "supporting_facts": {"title": [t1, t2], "sent_id": [0, 0]},
            "context": {"title": [t1, t2], "sentences": [[s], [a, " Also."]]},
        }
    if fmt == "musique":
        return {
            "id": f"2hop__{i}", "question": q, "answer": a, "answer_aliases": [a.upper()], "answerable": True,
            "paragraphs": [
                {"idx": 0, "title": t1, "paragraph_text": s, "is_supporting": True},
                {"idx": 1, "title": t2, "paragraph_text": a, "is_supporting": True},
            ],
            "question_decomposition": [
                {"id": 1, "question": q, "answer": t2, "paragraph_support_idx": 0},
                {"id": 2, "question": "#1", "answer": a, "paragraph_support_idx": 1},
            ],
        }
    if fmt == "flashrag":
        return {"id": f"test_{i}", "question": q, "golden_answers": [a, t1], "metadata": {"subj": t1, "obj": a}}
    if fmt == "searchr1":
        return {
            "id": f"train_{i}", "question": q, "golden_answers": [a], "data_source": "nq",
            "prompt": [{"role": "user", "content": q}], "ability": "fact-reasoning",
            "reward_model": {"ground_truth": {"target": [a]}, "style": "rule"},
            "extra_info": {"index": i, "split": "train"},
        }
    return {"question": q, "answer": [a, t2]}


@dataclass
class FileCase:
    """A file to write and read back."""

    suffix: str
    data: bytes
    record_level: bool
    """The container is intact and only record contents were changed: an error must name the record."""
    options: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        head = self.data[:160]
        return f"FileCase({self.suffix!r}, {len(self.data)} bytes, {head!r}..., record_level={self.record_level}, options={self.options})"


_ENCODINGS = ("latin-1", "cp1252", "utf-16", "utf-16-le", "utf-32", "utf-8-sig")


@st.composite
def _mutated_records(draw, records: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """The records after one JSON-level mutation, and its name."""
    kind = draw(st.sampled_from(["none", "drop", "retype", "retype", "huge", "many", "duplicate", "not_object"]))
    records = json.loads(json.dumps(records))  # a private copy
    if kind == "none":
        return records, kind
    i = draw(st.integers(0, len(records) - 1))
    if kind in ("drop", "retype", "huge"):
        paths = _paths(records[i])
        if not paths:
            return records, "none"
        path = draw(st.sampled_from(paths))
        if kind == "drop":
            _delete(records[i], path)
        elif kind == "retype":
            _set(records[i], path, draw(json_values(6)))
        else:
            _set(records[i], path, "x" * draw(st.integers(100_000, 1_000_000)))
    elif kind == "many":
        records = [dict(records[0], **{k: f"{v}-{n}" for k, v in records[0].items() if k in ("_id", "id")})
                   for n in range(draw(st.integers(500, 3000)))]
    elif kind == "duplicate":
        records.append(records[i])
    else:
        records[i] = draw(json_values(4))
    return records, kind


def _to_parquet(records: list[Any]) -> bytes | None:
    """Parquet bytes, or None when pyarrow cannot make a table of these rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if _has_raw(records) or not all(isinstance(r, dict) for r in records):
        return None
    try:
        table = pa.Table.from_pylist(records)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return None
    return sink.getvalue().to_pybytes()


@st.composite
def _container_bytes(draw, records: list[Any], containers: list[str]) -> tuple[str, bytes, bool]:
    """(suffix, bytes, container intact) for `records` in a drawn container."""
    container = draw(st.sampled_from(containers))
    intact = True
    if container == "parquet":
        data = _to_parquet(records)
        if data is None:  # rows pyarrow refuses: the JSON lines under a .parquet name (a mislabelled file)
            data, intact = ("\n".join(dumps(r) for r in records) + "\n").encode(), False
        suffix = ".parquet"
    elif container == "json":
        data, suffix = ("[\n" + ",\n".join(dumps(r) for r in records) + "\n]").encode(), ".json"
    elif container == "tsv":
        rows = ["id\ttext\ttitle"] + ["\t".join(str(r.get(k, "")) if isinstance(r, dict) else dumps(r)
                                                for k in ("id", "text", "title")) for r in records]
        data, suffix = ("\n".join(rows) + "\n").encode("utf-8", "surrogatepass"), ".tsv"
    else:
        data, suffix = ("\n".join(dumps(r) for r in records) + "\n").encode(), ".jsonl"
    return suffix, data, intact


@st.composite
def _byte_mutation(draw, suffix: str, data: bytes) -> tuple[str, bytes, bool]:
    """(suffix, bytes, unchanged) after one byte-level mutation (re-encoding, gzip, truncation...)."""
    kind = draw(st.sampled_from(["none", "none", "none", "encoding", "gzip", "truncate", "insert", "garbage",
                                 "empty", "rename"]))
    if kind == "encoding":
        encoding = draw(st.sampled_from(_ENCODINGS))
        recoded = data.decode("utf-8", "replace").encode(encoding, "replace")
        return suffix, recoded, encoding == "utf-8-sig" and suffix != ".parquet"
    if kind == "gzip":
        packed = gzip.compress(data, compresslevel=1)
        if draw(st.booleans()):
            packed = packed[: draw(st.integers(0, max(len(packed) - 1, 0)))]
            return suffix + ".gz", packed, False
        return suffix + ".gz", packed, True
    if kind == "truncate":
        return suffix, data[: draw(st.integers(0, max(len(data) - 1, 0)))], False
    if kind == "insert":
        at = draw(st.integers(0, len(data)))
        return suffix, data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:], False
    if kind == "garbage":
        return suffix, draw(st.binary(max_size=3000)), False
    if kind == "empty":
        return suffix, b"", False
    if kind == "rename":
        return draw(st.sampled_from([".txt", "", ".csv", ".json", ".jsonl", ".parquet"])), data, False
    return suffix, data, True


_TEXT = st.one_of(st.text(max_size=24), st.text(max_size=24), st.text(_ANY_CHARACTER, max_size=8))
"""Field text: sometimes with lone surrogates (written as JSON escapes, or as bytes no UTF-8 decoder takes)."""
_NONEMPTY = _TEXT.filter(str.strip)


@st.composite
def qa_file_cases(draw) -> FileCase:
    """A QA benchmark file of any format and container, maybe mutated."""
    fmt = draw(st.sampled_from(FORMATS))
    n = draw(st.integers(1, 3))
    records = [
        _qa_record(fmt, i, draw(_TEXT), draw(_NONEMPTY), draw(_NONEMPTY), draw(_NONEMPTY), draw(_TEXT)) for i in range(n)
    ]
    records, mutation = draw(_mutated_records(records))
    suffix, data, intact = draw(_container_bytes(records, ["jsonl", "json", "parquet"]))
    suffix, data, unchanged = draw(_byte_mutation(suffix, data))
    options: dict[str, Any] = {}
    if draw(st.integers(0, 4)) == 0:
        options["format"] = draw(st.sampled_from(["auto", *FORMATS]))
    if draw(st.integers(0, 6)) == 0:
        options["limit"] = draw(st.integers(0, 3))
    return FileCase(suffix, data, record_level=_record_level(records, mutation, intact and unchanged), options=options)


@st.composite
def corpus_file_cases(draw) -> FileCase:
    """A corpus file (jsonl `contents`, jsonl `title`/`text`, DPR tsv), maybe mutated."""
    layout = draw(st.sampled_from(["contents", "title_text", "tsv"]))
    n = draw(st.integers(1, 4))
    docs = []
    for i in range(n):
        doc_id = draw(st.one_of(st.just(f"doc{i}"), st.just(i), _NONEMPTY))
        title, text = draw(_TEXT), draw(_TEXT)
        if layout == "contents":
            docs.append({"id": doc_id, "contents": f'"{title}"\n{text}'})
        else:
            docs.append({"id": doc_id, "title": title, "text": text})
    docs, mutation = draw(_mutated_records(docs))
    containers = ["tsv"] if layout == "tsv" else ["jsonl"]
    suffix, data, intact = draw(_container_bytes(docs, containers))
    suffix, data, unchanged = draw(_byte_mutation(suffix, data))
    return FileCase(suffix, data, record_level=_record_level(docs, mutation, intact and unchanged))


def _record_level(records: list[Any], mutation: str, container_intact: bool) -> bool:
    """Whether any error must name a record: only record contents changed, and every record is still a
    non-empty object (a record that became `[]` on a jsonl file's first line makes it a JSON list, and a
    parquet file of `{}` rows has no columns: file-level problems)."""
    return container_intact and mutation != "none" and all(isinstance(r, dict) and r for r in records)


class FileHarness:
    """Writes each case to a fresh file in a temporary folder and reads it with `reader`."""

    def __init__(self, reader: Callable[..., Any], normal: str, folder: str | Path | None = None):
        self.reader, self.normal = reader, normal
        self._tmp = None if folder is not None else tempfile.TemporaryDirectory(prefix="searchgym-fuzz-")
        self.folder = Path(folder if folder is not None else self._tmp.name)  # type: ignore[union-attr]
        self._n = 0

    def run(self, case: FileCase) -> Outcome:
        self._n += 1
        path = self.folder / f"case{self._n}{case.suffix}"
        path.write_bytes(case.data)
        try:
            with time_limit(TIME_LIMIT_S):
                self.reader(path, **case.options)
        except InputHang as e:
            return _crash(str(e))
        except DataError as e:
            problem = _data_error_contract(e, path, case)
            return _crash(f"contract: {problem}: {e}") if problem else Outcome(type(e).__name__)
        except SearchGymError as e:
            return _crash(f"contract: {type(e).__name__} instead of a DataError naming the file: {e}")
        except Exception as e:  # noqa: BLE001 - anything untyped is what this harness looks for
            return _crash(_describe_exception(e))
        finally:
            path.unlink(missing_ok=True)
        return Outcome(self.normal)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _data_error_contract(e: DataError, path: Path, case: FileCase) -> str | None:
    if e.path != str(path) or not str(e).startswith(str(path)):
        return f"the error names {e.path!r}, not the file read"
    if case.record_level and e.record is None:
        return "a record-level problem is reported without its record"
    return None


def qa_harness(folder: str | Path | None = None) -> FileHarness:
    from searchgym.data import load_dataset_file

    return FileHarness(load_dataset_file, "dataset", folder)


def corpus_harness(folder: str | Path | None = None) -> FileHarness:
    from searchgym.corpus import load_corpus

    return FileHarness(load_corpus, "corpus", folder)


# --------------------------------------------------------------------------------------- surface: server


@dataclass(frozen=True)
class HTTPCase:
    body: bytes
    content_type: str = "application/json"

    def __repr__(self) -> str:
        return f"HTTPCase({len(self.body)} bytes, {self.body[:200]!r}..., {self.content_type!r})"


def fuzz_server_config():
    """The server's caps, small so that going past them is cheap."""
    from searchgym.retrieval.server import ServerConfig

    return ServerConfig(port=0, max_topk=20, max_queries=32, max_query_chars=500, max_body_bytes=64 * 1024,
                        warmup=False)


_QUERY_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(_ANY_CHARACTER, max_size=20),  # lone surrogates reach the server as \\u escapes
    st.sampled_from(["Rome", "river Tiber", "", "   ", "\x00", "the", "x" * 501, "é" * 600]),
)


@st.composite
def server_cases(draw) -> HTTPCase:
    """A `/retrieve` body: well-formed, wrong-typed, over a cap, not JSON or not UTF-8."""
    kind = draw(st.sampled_from(["request", "request", "request", "many", "json", "bytes", "raw", "oversized",
                                 "long_query", "encoded"]))
    content_type = draw(st.sampled_from(["application/json", "application/json", "text/plain", "",
                                         "application/x-www-form-urlencoded"]))
    if kind in ("request", "encoded"):
        body: dict[str, Any] = {}
        if draw(st.integers(0, 5)):
            body["queries"] = draw(st.one_of(st.lists(_QUERY_TEXT, max_size=4), json_values(4)))
        if draw(st.booleans()):
            body["topk"] = draw(st.one_of(
                st.integers(-5, 30), st.integers(10**3, 10**30), st.sampled_from(RAW_TOKENS), json_leaves(),
                st.lists(st.integers(), max_size=2)))
        if draw(st.booleans()):
            body["return_scores"] = draw(st.one_of(st.booleans(), json_leaves()))
        if draw(st.integers(0, 4)) == 0:
            body[draw(st.text(max_size=10))] = draw(json_values(3))
        text = dumps(body)
        encoding = draw(st.sampled_from(["utf-16", "utf-32", "latin-1"])) if kind == "encoded" else "utf-8"
        return HTTPCase(text.encode(encoding, "replace"), content_type)
    if kind == "many":
        n = draw(st.integers(0, 100))
        return HTTPCase(dumps({"queries": ["Rome river"] * n, "topk": 2}).encode(), content_type)
    if kind == "json":
        return HTTPCase(dumps(draw(json_values())).encode(), content_type)
    if kind == "bytes":
        return HTTPCase(draw(st.binary(max_size=300)), content_type)
    if kind == "raw":
        return HTTPCase(('{"queries": ["Rome"], "topk": ' + draw(st.sampled_from(RAW_TOKENS)) + "}").encode(), content_type)
    if kind == "oversized":
        pad = draw(st.integers(64 * 1024, 256 * 1024))
        return HTTPCase(('{"queries": ["Rome"],' + " " * pad + '"topk": 1}').encode(), content_type)
    n = draw(st.integers(501, 5000))
    return HTTPCase(dumps({"queries": ["a" * n], "topk": 1}).encode(), content_type)


class ServerHarness:
    """The server's ASGI app (started, with its batcher) driven through httpx in a private event loop."""

    def __init__(self, timeout_s: float = TIME_LIMIT_S):
        import httpx

        from searchgym.retrieval import BM25Retriever
        from searchgym.retrieval.server import create_app

        retriever = BM25Retriever(Corpus(FUZZ_DOCS, name="fuzz"), cache_dir=False)
        retriever.search(["Rome river"], 1)  # numba compiles on the first search
        self.config = fuzz_server_config()
        self.app = create_app(retriever, self.config)
        self._loop = asyncio.new_event_loop()
        self._lifespan = self.app.router.lifespan_context(self.app)
        self._loop.run_until_complete(self._lifespan.__aenter__())
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://fuzz", timeout=timeout_s)
        self.timeout_s = timeout_s

    def run(self, case: HTTPCase) -> Outcome:
        headers = {"content-type": case.content_type} if case.content_type else {}
        try:
            response = self._loop.run_until_complete(
                asyncio.wait_for(self.client.post("/retrieve", content=case.body, headers=headers), self.timeout_s)
            )
        except (asyncio.TimeoutError, TimeoutError):
            return _crash(f"no response within {self.timeout_s:g} s")
        except Exception as e:  # noqa: BLE001 - the transport raising is a crash too
            return _crash(_describe_exception(e))
        return http_outcome(response.status_code, response.content, case.body)

    def close(self) -> None:
        self._loop.run_until_complete(self.client.aclose())
        self._loop.run_until_complete(self._lifespan.__aexit__(None, None, None))
        self._loop.close()


def http_outcome(status: int, content: bytes, request_body: bytes) -> Outcome:
    """The outcome of one `/retrieve` exchange; anything but 200 or a 4xx with a message is a crash."""
    try:
        answer = json.loads(content)
    except ValueError:
        return _crash(f"HTTP {status} with a body that is not JSON: {content[:200]!r}")
    if status == 200:
        expected = _query_count(request_body)
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, list) or (expected is not None and len(result) != expected):
            return _crash(f"contract: HTTP 200 with {len(result) if isinstance(result, list) else 'no'} result lists "
                          f"for {expected} queries")
        return Outcome("http 200")
    if 400 <= status < 500:
        detail = answer.get("detail") if isinstance(answer, dict) else None
        if not isinstance(detail, str) or not detail.strip():
            return _crash(f"contract: HTTP {status} without a message: {content[:200]!r}")
        return Outcome(f"http {status}")
    return _crash(f"HTTP {status}: {content[:300]!r}")


def _query_count(body: bytes) -> int | None:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    queries = payload.get("queries") if isinstance(payload, dict) else None
    return len(queries) if isinstance(queries, list) else None


# -------------------------------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class Surface:
    name: str
    strategy: Callable[[], st.SearchStrategy]
    harness: Callable[[], Any]


def _verdict_cases() -> st.SearchStrategy:
    from benchmarks.fuzz_verdicts import verdict_cases  # that module imports this one

    return verdict_cases()


def _verdict_harness() -> Any:
    from benchmarks.fuzz_verdicts import VerdictHarness

    return VerdictHarness()


def _answer_cases() -> st.SearchStrategy:
    from benchmarks.fuzz_answers import answer_cases  # that module imports this one

    return answer_cases()


def _answer_harness() -> Any:
    from benchmarks.fuzz_answers import AnswerHarness

    return AnswerHarness()


SURFACES: dict[str, Surface] = {
    "env": Surface("env", env_cases, EnvHarness),
    "qa_files": Surface("qa_files", qa_file_cases, qa_harness),
    "corpus_files": Surface("corpus_files", corpus_file_cases, corpus_harness),
    "server": Surface("server", server_cases, ServerHarness),
    "verdicts": Surface("verdicts", _verdict_cases, _verdict_harness),
    "answers": Surface("answers", _answer_cases, _answer_harness),
}

FUZZ_SETTINGS = {"deadline": None, "database": None, "suppress_health_check": list(HealthCheck)}
"""Hypothesis settings shared with the tests: no per-example deadline (hangs are caught by `time_limit`,
and a loaded machine must not fail a run), no example database (nothing written to the checkout)."""


@dataclass
class Tally:
    surface: str
    inputs: int = 0
    outcomes: Counter = field(default_factory=Counter)
    crashes: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0
    slowest_s: float = 0.0


def run_surface(surface: Surface, examples: int, *, random_seed: int = 0) -> Tally:
    """Run `examples` generated inputs through one surface (no shrinking) and count the outcomes."""
    tally = Tally(surface.name)
    harness = surface.harness()

    @seed(random_seed)
    @settings(max_examples=examples, phases=[Phase.generate], **FUZZ_SETTINGS)
    @given(case=surface.strategy())
    def one(case):
        started = time.perf_counter()
        outcome = harness.run(case)
        tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
        tally.inputs += 1
        tally.outcomes[outcome.kind] += 1
        if outcome.crash is not None:
            tally.crashes.append((repr(case)[:400], outcome.crash))

    started = time.perf_counter()
    try:
        one()
    finally:
        tally.wall_s = time.perf_counter() - started
        harness.close()
    return tally


def crash_kind(crash: str) -> str:
    """A crash's kind, for counting: the exception class, the HTTP status, or the broken contract."""
    if crash.startswith("contract: "):
        return "contract: " + crash.removeprefix("contract: ").split(":")[0]
    if crash.startswith("HTTP "):
        return " ".join(crash.split()[:2])
    return crash.split(":")[0]


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def report(tallies: list[Tally]) -> str:
    lines = [f"{'surface':<13} {'inputs':>6} {'crashes':>7} {'wall_s':>7} {'slowest_s':>9}  outcomes"]
    for t in tallies:
        lines.append(f"{t.surface:<13} {t.inputs:>6} {len(t.crashes):>7} {t.wall_s:>7.1f} {t.slowest_s:>9.2f}  "
                     f"{_counts(t.outcomes)}")
    for t in tallies:
        examples: dict[str, tuple[str, str]] = {}
        kinds: Counter = Counter()
        for case, crash in t.crashes:
            kinds[crash_kind(crash)] += 1
            examples.setdefault(crash_kind(crash), (case, crash))
        if kinds:
            lines.append(f"{t.surface} crash kinds: {_counts(kinds)}")
        for case, crash in examples.values():
            lines.append(f"  CRASH {t.surface}: {crash[:300]}\n    input: {case}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="fuzz every input surface with bad input; crashes must be 0")
    p.add_argument("--examples", type=int, default=2000, help="inputs per surface")
    p.add_argument("--surface", action="append", choices=sorted(SURFACES), help="surfaces to run (default: all)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    names = args.surface or list(SURFACES)
    # Fuzzed files make the loaders warn (a supporting title missing from the context...); the counts are
    # what this reports.
    logging.getLogger("searchgym").setLevel(logging.ERROR)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs", flush=True)
    tallies = []
    for name in names:
        tallies.append(run_surface(SURFACES[name], args.examples, random_seed=args.seed))
        print(f"  {name}: {tallies[-1].inputs} inputs in {tallies[-1].wall_s:.1f} s", flush=True)
    print(report(tallies))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if any(t.crashes for t in tallies) else 0


if __name__ == "__main__":
    raise SystemExit(main())
