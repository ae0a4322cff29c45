"""`python -m agents.experiments.baseline` at a small size: bars go to stderr, results to stdout after the bars."""

from __future__ import annotations

import pytest

from agents.experiments import baseline


@pytest.fixture(autouse=True)
def _own_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # default index caches land here, not in the user's


def test_baseline_prints_its_table_after_the_bars(capsys):
    assert baseline.main(["--episodes", "6", "--num-entities", "300", "--hops", "1"]) == 0
    out, err = capsys.readouterr()
    table = out[out.index("| agent |"):].split("\n\n")[0]
    assert "| oracle | 1.000 |" in table and len(table.splitlines()) == 5  # header, rule, three agents: nothing between
    for agent in ("no-search", "search-read", "oracle"):
        assert f"[{agent}] episodes" in err and "6/6" in err
    assert "[oracle]" not in out
