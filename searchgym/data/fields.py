"""Field access and coercion helpers shared by the per-format record parsers (`searchgym.data.parsers`).

Each helper checks one field's shape and raises `_RecordError` with a message naming the field; the
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


class _RecordError(Exception):
    """A record does not have the shape its format requires; the driver adds the file and position."""


def _type_name(value: Any) -> str:
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


def _field(raw: Mapping[str, Any], key: str, where: str = "") -> Any:
    if key not in raw or raw[key] is None:
        inside = f" in {where}" if where else ""
        raise _RecordError(f"missing required field {key!r}{inside} (found keys: {sorted(raw)})")
    return raw[key]


def _as_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _RecordError(f"field {name!r}: expected a string, got {_type_name(value)}")
    return _valid_text(value, name)


def _valid_text(value: str, name: str) -> str:
    bad = _SURROGATE.search(value)
    if bad is not None:
        raise _RecordError(
            f"field {name!r}: holds the unpaired surrogate {bad.group()!a} at character {bad.start()}, "
            "which is not valid Unicode text (a broken \\uXXXX escape?)"
        )
    return value


def _as_id(value: Any, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _RecordError(f"field {name!r}: expected a string or integer id, got {_type_name(value)}")
    text = _valid_text(str(value).strip(), name)
    if not text:
        raise _RecordError(f"field {name!r}: empty id")
    return text


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _RecordError(f"field {name!r}: expected an integer, got {_type_name(value)}")
    return value


def _as_list(value: Any, name: str) -> list[Any]:
    # numpy arrays (pandas-written parquet) and tuples count as lists; strings and mappings do not.
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise _RecordError(f"field {name!r}: expected a list, got {_type_name(value)}")
    return list(value)


def _as_mapping(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _RecordError(f"field {name!r}: expected an object, got {_type_name(value)}")
    return value


def _as_str_list(value: Any, name: str, *, allow_scalar: bool = False) -> list[str]:
    if allow_scalar and isinstance(value, str):
        return [value]
    items = _as_list(value, name)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _RecordError(f"field {name!r}: expected a list of strings, item {i} is {_type_name(item)}")
        _valid_text(item, f"{name}[{i}]")
    return items


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    """Strip, drop empties and duplicates, keep first-seen order."""
    seen: dict[str, None] = {}
    for item in items:
        text = item.strip()
        if text:
            seen.setdefault(text, None)
    return tuple(seen)


def _extra(raw: Mapping[str, Any], consumed: Iterable[str]) -> dict[str, Any]:
    skip = set(consumed)
    return {k: v for k, v in raw.items() if k not in skip}


def _make_record(**fields: Any) -> QARecord:
    try:
        return QARecord(**fields)
    except ValueError as exc:
        raise _RecordError(str(exc)) from None


def _answer_entity(answer: str) -> tuple[str, ...]:
    # yes/no answers to comparison questions name no entity.
    return () if answer.strip().lower() in _YES_NO else (answer,)
