"""Read back the list and mapping cells of a CSV or TSV export, where every value is text.

A pandas export of a parquet or jsonl file (`DataFrame.to_csv`) prints its list and dict cells with
Python's `repr`, and NumPy arrays with NumPy's own print: `['Olivia' 'MFSK']` (no commas), or
`array(['Olivia', 'MFSK'], dtype=object)` inside a printed dict. Other tools write JSON. `read_cell` reads
all three back. A cell that looks like a list or a mapping but cannot be read is refused: read as one
string it would become one wrong answer, and every record holding it would score 0 for a correct answer.

The reader never evaluates code: it walks Python's tokens and accepts only literals (strings, numbers,
True, False, None), lists, tuples, dicts, and NumPy's `array(...)` printout.
"""

from __future__ import annotations

import ast
import io
import json
import math
import tokenize
from collections.abc import Mapping
from typing import Any

from searchgym.data.fields import RecordShapeError

STRUCTURED_COLUMNS: Mapping[str, frozenset[str]] = {
    "searchr1": frozenset({"golden_answers", "prompt", "reward_model", "extra_info"}),
    "flashrag": frozenset({"golden_answers", "metadata"}),
    "nq_open": frozenset({"answer", "answer_aliases"}),
    "hotpotqa": frozenset({"supporting_facts", "context"}),
    "hotpotqa_hf": frozenset({"supporting_facts", "context"}),
    "2wiki": frozenset({"supporting_facts", "context", "evidences"}),
    "musique": frozenset({"question_decomposition", "paragraphs", "answer_aliases"}),
    "kilt": frozenset({"output", "meta"}),
}
"""The columns of each format that hold lists or mappings, and so are read back from a CSV or TSV cell.
PopQA's `possible_answers` is JSON text in every layout of its release; its parser reads it."""

_HOW = "re-export the file as jsonl or parquet, e.g. DataFrame.to_json(path, orient='records', lines=True)"
_NAMES = {"True": True, "False": False, "None": None, "nan": math.nan, "inf": math.inf}
_SKIP = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER})


def decode_row(row: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """`row` with the cells of `fmt`'s structured columns read back (`read_cell`); other cells as they are."""
    columns = STRUCTURED_COLUMNS.get(fmt, frozenset())
    out = dict(row)
    for key, value in row.items():
        if isinstance(key, str) and key.lower() in columns and isinstance(value, str):
            out[key] = read_cell(value, key)
    return out


def read_cell(text: str, name: str) -> Any:
    """The value a printed cell holds: a list or mapping for a cell that starts with `[` or `{` (JSON, a
    Python repr or a NumPy print), a boolean for `True`/`False` as pandas prints them, else the text.

    >>> read_cell("['Olivia' 'MFSK']", "golden_answers")
    ['Olivia', 'MFSK']
    >>> read_cell("{'target': array(['May 18, 2018'], dtype=object)}", "ground_truth")
    {'target': ['May 18, 2018']}
    >>> read_cell("Paris", "answer"), read_cell("True", "answer")
    ('Paris', True)
    """
    stripped = text.strip()
    if stripped in ("True", "False"):
        return stripped == "True"
    if stripped[:1] not in ("[", "{"):
        return text
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    except RecursionError:
        raise RecordShapeError(f"field {name!r}: the cell is nested too deeply to read: {_excerpt(stripped)}") from None
    closing = "]" if stripped[0] == "[" else "}"
    if not stripped.endswith(closing):
        raise RecordShapeError(
            f"field {name!r}: the cell starts a printed {'list' if closing == ']' else 'mapping'} but does not end "
            f"with {closing!r} (cut off?): {_excerpt(stripped)}; {_HOW}"
        )
    try:
        return _Printed(stripped).value()
    except RecursionError:
        raise RecordShapeError(f"field {name!r}: the cell is nested too deeply to read: {_excerpt(stripped)}") from None
    except (ValueError, SyntaxError, TypeError, tokenize.TokenError) as exc:  # TypeError: a list as a dict key
        raise RecordShapeError(
            f"field {name!r}: the cell looks like a printed list or mapping but is neither JSON, a Python repr nor "
            f"a NumPy print ({exc}): {_excerpt(stripped)}; {_HOW}"
        ) from None


def _excerpt(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


class _Printed:
    """A recursive-descent reader over the Python tokens of one printed value."""

    def __init__(self, text: str):
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        self.tokens = [t for t in tokens if t.type not in _SKIP]
        self.pos = 0

    def value(self) -> Any:
        found = self._value()
        if self.pos != len(self.tokens):
            raise ValueError(f"unexpected {self._peek()!r} after the value")
        return found

    def _peek(self) -> str:
        return self.tokens[self.pos].string if self.pos < len(self.tokens) else ""

    def _take(self, expected: str | None = None) -> tokenize.TokenInfo:
        if self.pos >= len(self.tokens):
            raise ValueError("the value ends early")
        token = self.tokens[self.pos]
        if expected is not None and token.string != expected:
            raise ValueError(f"expected {expected!r}, found {token.string!r}")
        self.pos += 1
        return token

    def _value(self) -> Any:
        token = self._take()
        if token.string in ("[", "("):
            return self._sequence("]" if token.string == "[" else ")")
        if token.string == "{":
            return self._mapping()
        if token.string == "...":
            raise ValueError("NumPy shortened the array to '...', so its values are not in the file")
        if token.type == tokenize.STRING:
            text = ast.literal_eval(token.string)
            return text.decode("utf-8") if isinstance(text, bytes) else text
        if token.type == tokenize.NUMBER:
            return ast.literal_eval(token.string)
        if token.string == "-" and self.pos < len(self.tokens) and self.tokens[self.pos].type == tokenize.NUMBER:
            return -ast.literal_eval(self._take().string)
        if token.string in _NAMES:
            return _NAMES[token.string]
        if token.string == "array" and self._peek() == "(":
            return self._array()
        raise ValueError(f"{token.string!r} is not a literal")

    def _sequence(self, closing: str) -> list[Any]:
        # NumPy prints its arrays without commas (`['a' 'b']`), so a comma between items is optional.
        items: list[Any] = []
        while self._peek() != closing:
            items.append(self._value())
            if self._peek() == ",":
                self._take()
        self._take(closing)
        return items

    def _mapping(self) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        while self._peek() != "}":
            key = self._value()
            self._take(":")
            out[key] = self._value()
            if self._peek() != "}":
                self._take(",")
        self._take("}")
        return out

    def _array(self) -> Any:
        """`array(values, dtype=...)` as NumPy's repr writes it: the values; keyword arguments are skipped."""
        self._take("(")
        values = self._value()
        while self._peek() == ",":
            self._take()
            if self._peek() == ")":
                break
            self._take()  # the keyword's name
            self._take("=")
            self._take()  # its value: a name such as object, or a string such as '<U12'
        self._take(")")
        return values
