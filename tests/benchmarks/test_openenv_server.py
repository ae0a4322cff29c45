"""The OpenEnv server benchmark at a small size: both sides play every episode, and the report is printed
after the bars."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv", reason="the benchmark serves through OpenEnv (pip install 'searchgym[openenv]')")

from benchmarks import openenv_server


def test_openenv_server_benchmark_reports_both_sides(capsys):
    assert openenv_server.main(["--sessions", "3", "--episodes", "7"]) == 0
    out, err = capsys.readouterr()
    # 7 episodes of two steps each, on each side; the 3 sessions share the 7 episodes between them.
    assert "in-process env: 14 steps in" in out and "OpenEnv over loopback, 3 sessions: 14 steps in" in out
    assert "steps/s, 0 errors" in out and "ratio served / in-process:" in out and "load average" in out
    assert "[openenv_server] OpenEnv, 3 sessions, 7 episodes" in err and "7/7" in err and "[openenv_server]" not in out
