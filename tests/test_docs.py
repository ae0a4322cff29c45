"""Every ```python block in docs/ and the README runs, page by page, and the site builds in strict mode.

A block whose first line is `# requires: module[, module]` (an RL framework's example in docs/frameworks.md)
runs where those modules import and is left out where they do not."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_REQUIRES = re.compile(r"\A# requires: ([\w., ]+)\n")


FRAMEWORKS = ("openenv", "verifiers", "trl", "skyrl_gym", "gem", "verl")
"""Optional RL frameworks (each an extra of pyproject): a page whose examples import one that is not
installed is skipped, saying which (docs/frameworks.md needs them all)."""


def _missing_frameworks(blocks: list[str]) -> list[str]:
    import ast
    import importlib.util

    imported = set()
    for code in blocks:
        for node in ast.walk(ast.parse(code)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module] if (
                isinstance(node, ast.ImportFrom) and node.module and node.level == 0) else []
            for parts in (name.split(".") for name in names):
                imported.add(parts[0])
                if parts[1:2] == ["integrations"] and len(parts) > 2:  # searchgym.integrations.openenv needs openenv
                    imported.add(parts[2])
    return sorted(name for name in imported & set(FRAMEWORKS) if importlib.util.find_spec(name) is None)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_doc_examples_run(page, tmp_path, monkeypatch):
    blocks = _BLOCK.findall(page.read_text())
    if not blocks:
        pytest.skip(f"{page.name} has no python examples")
    missing = _missing_frameworks(blocks)
    if missing:
        pytest.skip(f"{page.name}'s examples need {', '.join(missing)} (pip install the extras named on the page)")
    monkeypatch.chdir(tmp_path)
    # The README's snippet uses the default index cache (~/.cache/searchgym): keep it out of the real one.
    monkeypatch.setenv("HOME", str(tmp_path))
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, code in enumerate(blocks):
        needs = _REQUIRES.match(code)
        if needs and not all(_has_module(m.strip()) for m in needs.group(1).split(",")):
            continue
        try:
            exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{page.name}, python block {i} failed: {e!r}\n{code}") from e


def test_site_builds_strict(tmp_path):
    if shutil.which("mkdocs") is None and not _has_module("mkdocs"):
        pytest.skip("mkdocs is not installed (it comes with the dev extra)")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_the_default_test_command_runs_the_library_doctests():
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in options["addopts"].split()
    # without the packages in testpaths, a bare `pytest` collects doctests only under tests/
    assert {"searchgym", "agents"} <= set(options["testpaths"])


def test_site_highlights_code_offline_and_its_nav_fits_one_row(tmp_path):
    if not _has_module("mkdocs"):
        pytest.skip("mkdocs is not installed (it comes with the dev extra)")
    import yaml

    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    index = (site / "index.html").read_text()
    # Pygments spans in the page itself; no highlight.js, which would need a CDN.
    assert '<div class="codehilite">' in index and '<span class="kn">import</span>' in index
    assert "highlight.min.js" not in index and (site / "css" / "pygments.css").is_file()
    # The landing page says how to install.
    assert "pip install -e" in (ROOT / "docs" / "index.md").read_text()
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    titles = [next(iter(entry)) for entry in nav]
    assert len(titles) <= 6 and sum(len(t) for t in titles) <= 60, titles
