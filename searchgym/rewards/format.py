"""Format validity of a whole Search-R1-style trajectory."""

from __future__ import annotations

import re
from collections.abc import Sequence

_TAG = re.compile(r"<(/?)(think|search|answer|information)>")


def format_valid(turns: Sequence[str]) -> bool:
    """True if every agent turn is well formed and the trajectory ends with an answer.

    A well-formed turn has balanced, non-nested `<think>`, `<search>` and `<answer>` tags, never writes
    `<information>` itself (that block belongs to the environment), and holds exactly one action
    (`<search>` or `<answer>`); only the last turn may answer.
    """
    if not turns:
        return False
    for i, turn in enumerate(turns):
        open_tag: str | None = None
        actions: list[str] = []
        for slash, name in _TAG.findall(turn):  # (slash, name) tuples: no match objects to build
            closing = slash == "/"
            if name == "information":
                return False
            if not closing:
                if open_tag is not None:
                    return False
                open_tag = name
            else:
                if open_tag != name:
                    return False
                open_tag = None
                if name in ("search", "answer"):
                    actions.append(name)
        if open_tag is not None or len(actions) != 1:
            return False
        last = i == len(turns) - 1
        if (actions[0] == "answer") != last:
            return False
    return True
