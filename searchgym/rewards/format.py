"""Format validity of a whole Search-R1-style trajectory."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_TAG = re.compile(r"<(/?)(think|search|answer|information)>")


def turn_action(turn: str) -> str | None:
    """The one action of a well-formed turn (`"search"` or `"answer"`), None when the turn is not well
    formed.

    A well-formed turn has balanced, non-nested `<think>`, `<search>` and `<answer>` tags, never writes
    `<information>` itself (that block belongs to the environment), and holds exactly one action.
    """
    open_tag: str | None = None
    action: str | None = None
    for slash, name in _TAG.findall(turn):  # (slash, name) tuples: no match objects to build
        if name == "information":
            return None
        if not slash:
            if open_tag is not None:
                return None
            open_tag = name
        else:
            if open_tag != name:
                return None
            open_tag = None
            if name != "think":
                if action is not None:
                    return None
                action = name
    return None if open_tag is not None else action


def actions_valid(actions: Iterable[str | None]) -> bool:
    """True when every turn's `turn_action` is a search except the last, which is an answer."""
    last = None
    for action in actions:
        if action is None or last == "answer":
            return False
        last = action
    return last == "answer"


def format_valid(turns: Sequence[str]) -> bool:
    """True if every agent turn is well formed (`turn_action`) and the trajectory ends with an answer:
    each turn holds exactly one action, and only the last turn answers."""
    return actions_valid(map(turn_action, turns))
