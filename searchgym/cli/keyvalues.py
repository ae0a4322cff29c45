"""The one reader of `KEY=VALUE` command-line items (`--env-arg`, `--env-option`): keyword arguments whose
values are read as JSON when they parse (`300`, `[1, 2]`, `false`), as text otherwise."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.errors import ConfigError


def key_values(items: Sequence[str], flag: str, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`items` as a dict on top of `base`; an item without `=` or whose key is not an identifier is a
    `ConfigError` naming `flag`.

    >>> key_values(["num_entities=300", "hops=[1]", "retriever=rank_bm25"], "--env-arg")
    {'num_entities': 300, 'hops': [1], 'retriever': 'rank_bm25'}
    """
    out = dict(base or {})
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.isidentifier():
            raise ConfigError(f"{flag} takes KEY=VALUE with KEY a keyword argument (e.g. num_entities=300), got {item!r}")
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out
