"""The `qa_files` and `corpus_files` surfaces: `load_dataset_file` and `load_corpus` on files of every
format and container, mutated record by record and byte by byte."""

from __future__ import annotations

import gzip
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from searchgym.data.formats import FORMATS
from searchgym.errors import DataError, SearchGymError
from tools.fuzz.outcomes import TIME_LIMIT_S, InputHang, Outcome, crash, describe_exception, time_limit
from tools.fuzz.strategies import ANY_CHARACTER, delete_path, dumps, has_raw, json_paths, json_values, set_path



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
        paths = json_paths(records[i])
        if not paths:
            return records, "none"
        path = draw(st.sampled_from(paths))
        if kind == "drop":
            delete_path(records[i], path)
        elif kind == "retype":
            set_path(records[i], path, draw(json_values(6)))
        else:
            set_path(records[i], path, "x" * draw(st.integers(100_000, 1_000_000)))
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

    if has_raw(records) or not all(isinstance(r, dict) for r in records):
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


_TEXT = st.one_of(st.text(max_size=24), st.text(max_size=24), st.text(ANY_CHARACTER, max_size=8))
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
    # A forced folder format ('beir') makes any file a file-level problem: the loader refuses it before any record.
    record_level = _record_level(records, mutation, intact and unchanged) and options.get("format") != "beir"
    return FileCase(suffix, data, record_level=record_level, options=options)


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
            return crash(str(e))
        except DataError as e:
            problem = _data_error_contract(e, path, case)
            return crash(f"contract: {problem}: {e}") if problem else Outcome(type(e).__name__)
        except SearchGymError as e:
            return crash(f"contract: {type(e).__name__} instead of a DataError naming the file: {e}")
        except Exception as e:  # noqa: BLE001 - anything untyped is what this harness looks for
            return crash(describe_exception(e))
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
