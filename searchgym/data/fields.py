"""Field access and coercion helpers shared by the per-format record parsers (`searchgym.data.parsers`).

Each helper checks one field's shape and raises `RecordShapeError` with a message naming the field; the
loader adds the file and the record's position and re-raises it as a `DataError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from searchgym.data.records import QARecord

_YES_NO = frozenset({"yes", "no"})
# JSON's \\uXXXX escapes can spell lone UTF-16 surrogates, which no valid text contains and which fail
# later, far from the file (encoding a prompt, a server's response).
_SURROGATE = re.compile("[\ud800-\udfff]")


class RecordShapeError(Exception):
    """A record does not have the shape its format requires; the driver adds the file and position."""


def type_name(value: Any) -> str:
    """How error messages name the JSON type of `value` ("an object", "a list", "null", ...)."""
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
    }
    if value is None:
        return "null"
    return names.get(type(value), type(value).__name__)


def required_field(raw: Mapping[str, Any], key: str, where: str = "") -> Any:
    """`raw[key]`, or `RecordShapeError` when the key is missing or null (`where` names the enclosing field)."""
    if key not in raw or raw[key] is None:
        inside = f" in {where}" if where else ""
        raise RecordShapeError(f"missing required field {key!r}{inside} (found keys: {sorted(raw)})")
    return raw[key]


def as_str(value: Any, name: str) -> str:
    """`value` as a string; `RecordShapeError` naming field `name` if it is not valid text."""
    if not isinstance(value, str):
        raise RecordShapeError(f"field {name!r}: expected a string, got {type_name(value)}")
    return _valid_text(value, name)


def _valid_text(value: str, name: str) -> str:
    bad = _SURROGATE.search(value)
    if bad is not None:
        raise RecordShapeError(
            f"field {name!r}: holds the unpaired surrogate {bad.group()!a} at character {bad.start()}, "
            "which is not valid Unicode text (a broken \\uXXXX escape?)"
        )
    return value


def as_id(value: Any, name: str) -> str:
    """`value` (a string or integer) as a non-empty stripped id string."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RecordShapeError(f"field {name!r}: expected a string or integer id, got {type_name(value)}")
    text = _valid_text(str(value).strip(), name)
    if not text:
        raise RecordShapeError(f"field {name!r}: empty id")
    return text


def as_int(value: Any, name: str) -> int:
    """`value` as an integer (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordShapeError(f"field {name!r}: expected an integer, got {type_name(value)}")
    return value


def as_list(value: Any, name: str) -> list[Any]:
    # numpy arrays (pandas-written parquet) and tuples count as lists; strings and mappings do not.
    """`value` as a list; tuples and numpy arrays count, strings and mappings do not."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise RecordShapeError(f"field {name!r}: expected a list, got {type_name(value)}")
    return list(value)


def as_mapping(value: Any, name: str) -> Mapping[str, Any]:
    """`value` as a mapping (a JSON object)."""
    if not isinstance(value, Mapping):
        raise RecordShapeError(f"field {name!r}: expected an object, got {type_name(value)}")
    return value


def as_str_list(value: Any, name: str, *, allow_scalar: bool = False) -> list[str]:
    """`value` as a list of strings; with `allow_scalar`, a lone string becomes a one-item list."""
    if allow_scalar and isinstance(value, str):
        return [value]
    items = as_list(value, name)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise RecordShapeError(f"field {name!r}: expected a list of strings, item {i} is {type_name(item)}")
        _valid_text(item, f"{name}[{i}]")
    return items


BOOLEAN_ANSWERS = {True: ("yes", "true"), False: ("no", "false")}
"""How a boolean gold answer (StrategyQA and other yes/no sets) is read: yes/no, with true/false as aliases."""


def as_answer_list(value: Any, name: str) -> list[str]:
    """Gold answers: a string, a boolean (see `BOOLEAN_ANSWERS`), or a list of these (tuples and numpy
    arrays count). Anything else is refused with a message naming the accepted types."""
    if isinstance(value, (str, bool)):
        return _answer_texts(value, name)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise RecordShapeError(f"field {name!r}: expected {_ANSWER_TYPES}, got {type_name(value)}")
    answers: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, (str, bool)):
            raise RecordShapeError(f"field {name!r}: expected {_ANSWER_TYPES}; item {i} is {type_name(item)}")
        answers += _answer_texts(item, f"{name}[{i}]")
    return answers


_ANSWER_TYPES = "a list of answers (strings or booleans), a string, or a boolean (read as yes/no)"


def _answer_texts(value: str | bool, name: str) -> list[str]:
    if isinstance(value, bool):
        return list(BOOLEAN_ANSWERS[value])
    return [_valid_text(value, name)]


def is_boolean_answer(value: Any) -> bool:
    """Whether a raw answer field is a boolean (or a list of them): yes/no answers name no entity."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return bool(value) and all(isinstance(v, bool) for v in value)
    return isinstance(value, bool)


def unique_texts(items: Iterable[str]) -> tuple[str, ...]:
    """Strip, drop empties and duplicates, keep first-seen order."""
    seen: dict[str, None] = {}
    for item in items:
        text = item.strip()
        if text:
            seen.setdefault(text, None)
    return tuple(seen)


def extra_fields(raw: Mapping[str, Any], consumed: Iterable[str]) -> dict[str, Any]:
    """The fields of `raw` not in `consumed`, kept as the record's metadata."""
    skip = set(consumed)
    return {k: v for k, v in raw.items() if k not in skip}


def make_record(**fields: Any) -> QARecord:
    """A `QARecord` from `fields`, its validation errors raised as `RecordShapeError`."""
    try:
        return QARecord(**fields)
    except ValueError as exc:
        raise RecordShapeError(str(exc)) from None


def answer_entities(answer: str) -> tuple[str, ...]:
    # yes/no answers to comparison questions name no entity.
    """The gold entities an answer names: the answer itself, or none for yes/no."""
    return () if answer.strip().lower() in _YES_NO else (answer,)
