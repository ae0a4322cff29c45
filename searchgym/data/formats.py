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

from searchgym.data.fields import _type_name
from searchgym.data.readers import _label, _Raw
from searchgym.errors import DataError

# Messages keep the logger they had before the loader was split into modules.
logger = logging.getLogger("searchgym.data.loaders")

DatasetFormat = Literal["auto", "hotpotqa", "hotpotqa_hf", "2wiki", "musique", "flashrag", "searchr1", "nq_open"]
FORMATS: tuple[str, ...] = tuple(f for f in get_args(DatasetFormat) if f != "auto")
"""Every concrete format name `load_dataset_file` accepts (besides "auto")."""

_FORMAT_HELP = (
    "hotpotqa (_id, question, answer, supporting_facts, context as lists), "
    "hotpotqa_hf (id, question, answer, supporting_facts and context as {title: [...]} columns), "
    "2wiki (hotpotqa plus evidences), "
    "musique (id, paragraphs, question_decomposition, answer, answer_aliases), "
    "flashrag (id, question, golden_answers, metadata), "
    "searchr1 (question, data_source, prompt, reward_model, extra_info), "
    "nq_open (question, answer)"
)
_SOURCE_PREFIXES = (
    ("popqa", "popqa"),
    ("trivia", "triviaqa"),
    ("bamboogle", "bamboogle"),
    ("hotpot", "hotpotqa"),
    ("2wiki", "2wiki"),
    ("musique", "musique"),
    ("nq", "nq"),
)


def _detect_format(first: _Raw, file: Path) -> str:
    value = first.value
    if not isinstance(value, Mapping):
        raise DataError(
            f"expected each record to be a JSON object, got {_type_name(value)}", path=file, record=_label(first)
        )
    keys = set(value)
    fmt = _format_from_keys(value, keys)
    if fmt is None:
        raise DataError(
            f"cannot tell the dataset format: the first record has keys {sorted(keys)}; "
            f"supported formats: {_FORMAT_HELP}. Pass format=... if the file is one of these.",
            path=file,
            record=_label(first),
        )
    return fmt


def _format_from_keys(value: Mapping[str, Any], keys: set[str]) -> str | None:
    if {"paragraphs", "question_decomposition"} <= keys:
        return "musique"
    if {"context", "supporting_facts"} <= keys:
        if "evidences" in keys:
            return "2wiki"
        return "hotpotqa_hf" if isinstance(value["context"], Mapping) else "hotpotqa"
    if "reward_model" in keys or {"prompt", "data_source"} <= keys:
        return "searchr1"
    if "golden_answers" in keys:
        return "flashrag"
    if {"question", "answer"} <= keys:
        return "nq_open"
    return None


def _default_source(fmt: str, file: Path) -> str:
    implied = {
        "hotpotqa": "hotpotqa",
        "hotpotqa_hf": "hotpotqa",
        "2wiki": "2wiki",
        "musique": "musique",
        "nq_open": "nq",
    }
    if fmt in implied:
        return implied[fmt]
    guessed = _guess_source_from_path(file)
    if guessed is None and fmt == "flashrag":
        logger.info("%s: no dataset name in the path; records get source=''. Pass source=... to set it.", file)
    return guessed or ""


def _guess_source_from_path(file: Path) -> str | None:
    # The file name is the most specific part (popqa_test.jsonl); FlashRAG's layout puts it in the
    # folder instead (popqa/test.jsonl). Folders further up name the user's machine, not the data.
    for part in (file.name, file.parent.name):
        found = _guess_source(part)
        if found:
            return found
    return None


def _guess_source(text: str) -> str | None:
    for token in re.split(r"[^a-z0-9]+", text.lower()):
        for prefix, name in _SOURCE_PREFIXES:
            if token.startswith(prefix):
                return name
    return None
