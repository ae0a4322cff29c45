"""Build argparse options from a config dataclass, with each field's attribute docstring as its help, so
the CLI and the Python API share one definition of every option."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import textwrap
import typing
from typing import Any, Literal, get_args, get_origin


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the string literal after each field)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = ()) -> None:
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        kind = hints[f.name]
        help_text = docs.get(f.name, "") + (f" (default: {default})" if default is not None else "")
        kwargs: dict[str, Any] = {"dest": f.name, "default": default, "help": help_text}
        origin, args = get_origin(kind), get_args(kind)
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **kwargs)
            continue
        if origin is Literal:
            kwargs["choices"] = list(args)
        elif origin is tuple:
            kwargs.update(nargs="+", type=args[0])
        elif origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            inner = [a for a in args if a is not type(None)]
            kwargs["type"] = inner[0] if inner and inner[0] in (int, float, str) else str
        elif kind in (int, float, str):
            kwargs["type"] = kind
        else:
            continue  # dicts and other structured fields are Python-API only
        parser.add_argument(flag, **kwargs)


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in vars(args).items() if k in names and v is not None})
