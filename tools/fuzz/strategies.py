"""Hypothesis strategies the surfaces share: any JSON value with raw tokens among its leaves (huge
integers, deep nesting, NaN, lone surrogates: what `json.dumps` cannot write or Python cannot read), the
paths into a JSON value, and any code point."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import strategies as st



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


def has_raw(value: Any) -> bool:
    if isinstance(value, Raw):
        return True
    if isinstance(value, dict):
        return any(has_raw(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_raw(v) for v in value)
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


def json_paths(value: Any, prefix: tuple = (), depth: int = 3) -> list[tuple]:
    """Every path (keys and indexes) into a JSON value, down to `depth` levels."""
    found = [prefix] if prefix else []
    if depth == 0:
        return found
    if isinstance(value, dict):
        for k, v in value.items():
            found += json_paths(v, prefix + (k,), depth - 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += json_paths(v, prefix + (i,), depth - 1)
    return found


def set_path(value: Any, path: tuple, new: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


def delete_path(value: Any, path: tuple) -> None:
    for step in path[:-1]:
        value = value[step]
    del value[path[-1]]


ANY_CHARACTER = st.one_of(st.characters(), st.characters(categories=["Cs"]))
"""Any code point, lone surrogates included (hypothesis leaves them out of text by default)."""
