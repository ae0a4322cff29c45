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


def test_vector_env_prints_the_ratio_after_the_bars(capsys):
    from benchmarks import vector_env

    assert vector_env.main(["--envs", "4", "--steps", "5", "--repeats", "1", "--num-entities", "300"]) == 0
    out, err = capsys.readouterr()
    assert "[vector_env] rounds" in err and "[vector_env]" not in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[0] for r in rows] == ["| plain loop", "| vector (list)", "| vector (dict)"]
    assert rows[0].endswith("| 1.00x |")
    # 4 envs x 5 steps: the plain loop searches once per search step; the vector env once per step at most
    calls = out.split("retriever calls per round: plain loop ")[1]
    plain_calls, vector_calls = int(calls.split(",")[0]), int(calls.split("vector ")[1])
    assert vector_calls <= 5 < plain_calls
