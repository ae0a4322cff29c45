"""No module of `searchgym.data` reaches into another one's private names.

A name with a leading underscore belongs to the file that defines it; a sibling that needs it is either
part of the same seam (and the code moves there) or the name is a shared helper with a public name.
The check reads the source with `ast`, so it sees every import form: absolute
(`from searchgym.data.x import _y`), relative (`from .x import _y`, `from .. import _y`) and attribute
access on an imported sibling module (`x._y` after `from searchgym.data import x` or
`import searchgym.data.x as x`). The rest of `searchgym` is held to the same rule for what it takes from
`searchgym.data`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "searchgym.data"
ROOT = Path(__file__).resolve().parents[2] / "searchgym" / "data"


def _module_name(path: Path) -> str:
    """The dotted name of the module stored at `path` (a package's `__init__.py` names the package)."""
    parts = list(path.relative_to(ROOT.parent.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module an `ImportFrom` reads from, as seen from `module`."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    # A package's own `__init__` is level 1 relative to itself; a plain module to its parent package.
    drop = node.level - 1 if is_package else node.level
    base = base[: len(base) - drop] if drop else base
    return ".".join(base + ([node.module] if node.module else []))


def _in_package(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def crossings(path: Path, source: str) -> list[str]:
    """Each private name that the file at `path` takes from another module of the package, as text."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(source, filename=str(path))
    found: list[str] = []
    sibling_aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source_module = _resolve(module, node, is_package)
            if not _in_package(source_module) or source_module == module:
                continue
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{path.name}:{node.lineno}: imports {alias.name} from {source_module}")
                elif _in_package(f"{source_module}.{alias.name}"):
                    # `from searchgym.data import readers`: the alias may name a module of the package.
                    sibling_aliases[alias.asname or alias.name] = f"{source_module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _in_package(alias.name) and alias.name != module:
                    if _is_private(alias.name.rsplit(".", 1)[-1]):
                        found.append(f"{path.name}:{node.lineno}: imports private module {alias.name}")
                    sibling_aliases[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            target = ast.unparse(node.value)
            if target in sibling_aliases:
                found.append(f"{path.name}:{node.lineno}: reads {target}.{node.attr} from {sibling_aliases[target]}")
    return found


FILES = sorted(ROOT.parent.rglob("*.py"))
"""Every module of `searchgym`; each is checked for what it takes from `searchgym.data`."""


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_no_private_name_crosses_a_file(path: Path) -> None:
    found = crossings(path, path.read_text(encoding="utf-8"))
    assert not found, f"{path.relative_to(ROOT.parent.parent)} uses private names of other modules:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("relative_path", "source"),
    [
        ("readers.py", "from searchgym.data.fields import _type_name\n"),
        ("readers.py", "from .fields import _type_name\n"),
        ("synthetic/names.py", "from ..fields import _type_name\n"),
        ("synthetic/__init__.py", "from .draws import _rng\n"),
        ("readers.py", "from searchgym.data import fields\nfields._type_name(1)\n"),
        ("readers.py", "import searchgym.data.fields as f\nf._type_name(1)\n"),
    ],
)
def test_the_check_sees_each_import_form(relative_path: str, source: str) -> None:
    assert len(crossings(ROOT / relative_path, source)) == 1


@pytest.mark.parametrize(
    ("relative_path", "source"),
    [
        ("readers.py", "from searchgym.data.fields import type_name\n"),
        ("readers.py", "from searchgym.errors import _private\n"),  # outside the package
        ("readers.py", "from searchgym.data.readers import _own\n"),  # its own name
        ("readers.py", "from searchgym.data import __all__\n"),  # dunders are not private
        ("readers.py", "x = object()\nx._y\n"),  # not an imported sibling
    ],
)
def test_the_check_lets_public_and_own_names_pass(relative_path: str, source: str) -> None:
    assert crossings(ROOT / relative_path, source) == []
