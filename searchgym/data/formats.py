"""The dataset format names, and how a file's format and its records' default `source` are found.

The formats themselves are described in `searchgym.data.loaders`; their parsers are in
`searchgym.data.parsers`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from searchgym.data.fields import type_name
from searchgym.data.readers import RawRecord, record_label
from searchgym.errors import DataError

# Messages keep the logger they had before the loader was split into modules.
logger = logging.getLogger("searchgym.data.loaders")

DatasetFormat = Literal[
    "auto", "hotpotqa", "hotpotqa_hf", "2wiki", "musique", "popqa", "flashrag", "searchr1", "nq_open", "kilt",
    "beir",
]
FORMATS: tuple[str, ...] = tuple(f for f in get_args(DatasetFormat) if f != "auto")
"""Every concrete format name `load_dataset_file` accepts (besides "auto"); `beir` is a folder's."""

_FORMAT_HELP = (
    "hotpotqa (_id, question, answer, supporting_facts, context as lists), "
    "hotpotqa_hf (id, question, answer, supporting_facts and context as {title: [...]} columns), "
    "2wiki (hotpotqa plus evidences), "
    "musique (id, question, question_decomposition, answer, answer_aliases, paragraphs?), "
    "popqa (id, question, subj, prop, obj, possible_answers), "
    "flashrag (id, question, golden_answers, metadata), "
    "searchr1 (data_source, prompt, reward_model, extra_info, question?), "
    "nq_open (question, answer), "
    "kilt (id, input, output [{answer, provenance}]), "
    "beir (a folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"
)
# What a record's keys must include for each format. The specific formats carry a dataset's own
# annotations; the generic ones (question and answers only) also match most specific rows, so they count
# only when no specific format matches.
_SIGNATURES: dict[str, tuple[frozenset[str], ...]] = {
    "musique": (frozenset({"question", "question_decomposition"}),),
    "2wiki": (frozenset({"context", "supporting_facts", "evidences"}),),
    "hotpotqa": (frozenset({"context", "supporting_facts"}),),
    "popqa": (frozenset({"subj", "prop", "obj", "possible_answers"}),),
    "searchr1": (frozenset({"reward_model"}), frozenset({"prompt", "data_source"})),
    "flashrag": (frozenset({"golden_answers"}),),
    "nq_open": (frozenset({"question", "answer"}),),
    "kilt": (frozenset({"input", "output"}),),
}
_GENERIC = frozenset({"flashrag", "nq_open"})
_NARROWER = {"hotpotqa": "2wiki"}
"""A format whose signature another's extends: dropped when the wider one matches too."""

DATASET_NAMES = {
    "hotpotqa": "HotpotQA",
    "2wiki": "2WikiMultihopQA",
    "musique": "MuSiQue",
    "popqa": "PopQA",
    "nq": "Natural Questions",
    "triviaqa": "TriviaQA",
    "bamboogle": "Bamboogle",
}
_SOURCE_PREFIXES = (
    ("popqa", "popqa"),
    ("trivia", "triviaqa"),
    ("bamboogle", "bamboogle"),
    ("hotpot", "hotpotqa"),
    ("2wiki", "2wiki"),
    ("musique", "musique"),
    ("nq", "nq"),
)


def detect_format(first: RawRecord, file: Path) -> str:
    """The format the first record's keys fit; `DataError` when none or more than one fits."""
    value = first.value
    if not isinstance(value, Mapping):
        raise DataError(
            f"expected each record to be a JSON object, got {type_name(value)}", path=file, record=record_label(first)
        )
    keys = set(value)
    candidates = _format_candidates(value, keys)
    if not candidates:
        raise DataError(
            f"cannot tell the dataset format: the first record has keys {sorted(keys)}; "
            f"supported formats: {_FORMAT_HELP}. Pass format=... if the file is one of these.",
            path=file,
            record=record_label(first),
        )
    if len(candidates) > 1:
        raise DataError(
            f"ambiguous dataset format: the first record (keys {sorted(keys)}) fits {' and '.join(candidates)}; "
            f"pass format= one of {candidates} to say which",
            path=file,
            record=record_label(first),
        )
    return candidates[0]


def _format_candidates(value: Mapping[str, Any], keys: set[str]) -> list[str]:
    """Every format the record's keys fit, the generic ones only when no specific one fits."""
    # Some exports capitalise their columns (Bamboogle's `Question`, `Answer`); the parsers accept both.
    keys = keys | {k.lower() for k in keys if isinstance(k, str)}
    matches = [fmt for fmt, signatures in _SIGNATURES.items() if any(sig <= keys for sig in signatures)]
    matches = [fmt for fmt in matches if _NARROWER.get(fmt) not in matches]
    specific = [fmt for fmt in matches if fmt not in _GENERIC]
    found = specific or matches
    if "hotpotqa" in found and isinstance(value["context"], Mapping):
        found[found.index("hotpotqa")] = "hotpotqa_hf"
    return found


def record_dataset(fmt: str, value: Mapping[str, Any]) -> str | None:
    """The benchmark a record belongs to, as its own content says (None when it does not say).

    Structure decides where a dataset has its own annotations (HotpotQA's supporting facts, 2Wiki's
    evidence triples, MuSiQue's decomposition, PopQA's subject and object), in the official layouts and in
    FlashRAG's `metadata`; Search-R1 rows name theirs in `data_source`; a TriviaQA answer object names
    TriviaQA. Rows with only a question and answers say nothing.
    """
    if fmt in ("hotpotqa", "hotpotqa_hf", "2wiki", "musique", "popqa"):
        return "hotpotqa" if fmt == "hotpotqa_hf" else fmt
    if fmt == "searchr1":
        source = value.get("data_source")
        # A data source we do not know (web_questions, a private set) still names a dataset: not NQ's.
        return (source_from_name(source) or source.strip() or None) if isinstance(source, str) else None
    if fmt == "nq_open":
        answer = value.get("answer")
        return "triviaqa" if isinstance(answer, Mapping) and ("aliases" in answer or "value" in answer) else None
    meta = value.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    if meta.get("subj") is not None and meta.get("obj") is not None:
        return "popqa"
    if "question_decomposition" in meta:
        return "musique"
    if "supporting_facts" in meta:
        return "2wiki" if "evidences" in meta else "hotpotqa"
    return None


def implied_source(fmt: str, file: Path) -> str:
    """The `source` records of format `fmt` from `file` get when the caller names none."""
    implied = {
        "hotpotqa": "hotpotqa",
        "hotpotqa_hf": "hotpotqa",
        "2wiki": "2wiki",
        "musique": "musique",
        "popqa": "popqa",
    }
    if fmt in implied:
        return implied[fmt]
    guessed = source_from_path(file)
    if guessed is None and fmt in ("kilt", "beir"):
        # KILT names its files after the task (fever-dev-kilt.jsonl), BEIR its folders (scifact/).
        return re.split(r"[^a-z0-9]+", file.name.lower())[0] or fmt
    if guessed is None and fmt == "nq_open":
        return "nq"
    if guessed is None and fmt == "flashrag":
        logger.info("%s: no dataset name in the path; records get source=''. Pass source=... to set it.", file)
    return guessed or ""


def source_from_path(file: Path) -> str | None:
    # The file name is the most specific part (popqa_test.jsonl); FlashRAG's layout puts it in the
    # folder instead (popqa/test.jsonl). Folders further up name the user's machine, not the data.
    """The dataset named by the file's name or, failing that, its folder's name (None if neither does)."""
    for part in (file.name, file.parent.name):
        found = source_from_name(part)
        if found:
            return found
    return None


def source_from_name(text: str) -> str | None:
    """The dataset a name such as `popqa_test` or a Search-R1 `data_source` names, or None."""
    for token in re.split(r"[^a-z0-9]+", text.lower()):
        for prefix, name in _SOURCE_PREFIXES:
            if token.startswith(prefix):
                return name
    return None
