"""The one reader of config fields' attribute docstrings (the string literal after each field), so every
CLI's help and the dataclass it is built from never disagree."""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from functools import lru_cache


@lru_cache(maxsize=None)
def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of a class's fields, inherited ones included (a subclass's own doc wins),
    with whitespace collapsed to single spaces."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # built in, or defined where the source cannot be read
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, nxt in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def field_doc(cls: type, name: str) -> str:
    """The attribute docstring of field `name` of `cls` ("" when it has none)."""
    return field_docs(cls).get(name, "")


def field_choices(cls: type, name: str) -> list:
    """The values of field `name`'s `Literal[...]` type, so a CLI's choices are the config's own.

    >>> from searchgym.retrieval.encoders import EncoderConfig
    >>> field_choices(EncoderConfig, "pooling")
    ['auto', 'mean', 'cls']
    """
    kind = typing.get_type_hints(cls)[name]
    if typing.get_origin(kind) is not typing.Literal:
        raise TypeError(f"{cls.__name__}.{name} is not a Literal field")
    return list(typing.get_args(kind))
