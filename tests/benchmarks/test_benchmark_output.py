"""The benchmarks' command lines at small sizes: bars go to stderr, results to stdout after the bars."""

from __future__ import annotations

import pytest

from benchmarks import bm25, judge_overhead


@pytest.fixture(autouse=True)
def _own_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # default index caches land here, not in the user's


def test_judge_overhead_shows_progress_and_reports(capsys):
    assert judge_overhead.main(["--passages", "1500", "--questions", "10", "--repeats", "1"]) == 0
    out, err = capsys.readouterr()
    assert "[judge_overhead] replays, cold then warm caches" in err and "2/2" in err
    assert "[cold caches] ratio:" in out and "[warm caches] ratio:" in out and "[judge_overhead]" not in out


@pytest.mark.slow
def test_bm25_shows_progress_and_reports(capsys):
    assert bm25.main(["--passages", "1500", "--queries", "40", "--rank-bm25-queries", "5", "--repeats", "1"]) == 0
    out, err = capsys.readouterr()
    assert "[bm25] world and indexes" in err and "[bm25] env vs bare retriever, entity matching on" in err
    assert "throughput ratio bm25s / rank-bm25" in out and "env, entity matching on" in out and "[bm25]" not in out
