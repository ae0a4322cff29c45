"""Helpers the tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_file(relative: str) -> Path:
    """A file under ../shared/data, or skip the test when the samples are absent (a user's checkout)."""
    path = SHARED_DATA / relative
    if not path.is_file():
        pytest.skip(
            f"real data sample {relative} not found at {SHARED_DATA} (only present in the development workspace; "
            "the same layouts are tested on small files the tests write)"
        )
    return path
