"""Build argparse options from a config dataclass, with each field's attribute docstring as its help, so
the CLI and the Python API share one definition of every option.

A field whose type is itself a dataclass becomes a group of dotted flags (`TrainConfig.env.hops` is
`--env.hops`); `dict` fields take JSON (`--env.options '{"template": "..."}'`); `bool` fields take
`--x/--no-x`; `Literal` fields list their choices.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal, get_args, get_origin

from searchgym.cli.fields import field_docs

__all__ = ["add_dataclass_arguments", "dataclass_from_args", "field_docs", "json_object", "nested_flags_for", "option_kwargs"]


def json_object(text: str) -> dict:
    """argparse type of a dict field: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _float(text: str) -> float:
    return float(text)  # accepts inf, which the learners' alpha uses


def option_kwargs(kind: Any) -> dict[str, Any] | None:
    """`add_argument` keyword arguments for a field of type `kind` (no dest, default or help), or None for a
    type the command line cannot express."""
    origin, args = get_origin(kind), get_args(kind)
    if kind is bool:
        return {"action": argparse.BooleanOptionalAction}
    if origin is Literal:
        return {"choices": list(args), "type": type(args[0])}
    if origin is tuple:
        return {"nargs": "+", "type": _float if args[0] is float else args[0]}
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return option_kwargs(inner[0]) if len(inner) == 1 else {"type": str}
    if kind is dict or origin is dict:
        return {"type": json_object, "metavar": "JSON"}
    if kind is float:
        return {"type": _float}
    if kind in (int, str):
        return {"type": kind}
    return None


def _default_of(f: dataclasses.Field) -> Any:
    """A field's default value (its factory called), or None when it has none."""
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = (), prefix: str = "",
                            defaults: Any = None) -> None:
    """One flag per field of `cls`, nested dataclass fields as dotted groups; defaults are None (unset), so
    `dataclass_from_args` leaves the dataclass's own default in place. A nested field's defaults are those
    of the instance its parent's field holds by default (`TrainConfig.rollout`'s, not `RolloutConfig`'s);
    `defaults` is that instance. `skip` names fields by their dotted place (`learner`, `env.options`)."""
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    target = parser if not prefix else parser.add_argument_group(f"{prefix.rstrip('.')} options", (cls.__doc__ or "").strip().splitlines()[0])
    for f in dataclasses.fields(cls):
        if prefix + f.name in skip:
            continue
        kind = hints[f.name]
        default = getattr(defaults, f.name) if defaults is not None else _default_of(f)
        if dataclasses.is_dataclass(kind):
            add_dataclass_arguments(parser, kind, skip=skip, prefix=f"{prefix}{f.name}.", defaults=default)
            continue
        kwargs = option_kwargs(kind)
        if kwargs is None:
            continue
        help_text = docs.get(f.name, "") + (f" (default: {default})" if default is not None else "")
        target.add_argument("--" + prefix + f.name.replace("_", "-"), dest=prefix + f.name, default=None, help=help_text.replace("%", "%%"),
                            **kwargs)


def dataclass_from_args(cls: type, args: argparse.Namespace, *, prefix: str = "", base: Any = None, **given: Any) -> Any:
    """An instance of `cls` from parsed flags: `base` (an instance of `cls`) with the flags given replaced,
    or without `base` the dataclass's defaults with them. A nested field starts from the instance its
    parent holds by default (its `default_factory`'s), so unset flags keep the defaults `--help` shows.
    `given` are field values already built (e.g. a learner config) that win over flags."""
    values = vars(args)
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in given:
            kwargs[f.name] = given[f.name]
        elif dataclasses.is_dataclass(hints[f.name]):
            inner = getattr(base, f.name) if base is not None else _default_of(f)
            kwargs[f.name] = dataclass_from_args(hints[f.name], args, prefix=f"{prefix}{f.name}.", base=inner)
        elif values.get(prefix + f.name) is not None:
            kwargs[f.name] = values[prefix + f.name]
    return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)


def nested_flags_for(flag: str, dests: Iterable[str]) -> list[str]:
    """The dotted flags among `dests` (parsed argument names such as `optim.lr`) that a flat `flag` most
    likely meant: those whose last part is its name (`--lr`: `--optim.lr`; `--no-lora`: `--no-optim.lora`),
    or its first hyphen read as the dot (`--env-id`: `--env.id`). Empty when there is none.

    >>> nested_flags_for("--kl-coef=0", ["optim.lr", "learner.kl_coef", "env.id"])
    ['--learner.kl-coef']
    >>> nested_flags_for("--env-id", ["optim.lr", "learner.kl_coef", "env.id"])
    ['--env.id']
    """
    if not flag.startswith("--"):
        return []
    name = flag[2:].split("=", 1)[0].replace("_", "-")
    negated = name.startswith("no-")
    found = []
    for dest in dests:
        if "." not in dest:
            continue
        dotted = dest.replace("_", "-")
        for candidate, prefix in ((name, ""), (name[3:], "no-")) if negated else ((name, ""),):
            if dotted.rsplit(".", 1)[1] == candidate or dotted == candidate.replace("-", ".", 1):
                found.append(f"--{prefix}{dotted}")
    return sorted(set(found))
