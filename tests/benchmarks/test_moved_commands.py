"""The commands that moved out of `benchmarks/` still run under their old names for one version: each alias
prints one deprecation line naming the new command on stderr and runs the new command's `main`."""

from __future__ import annotations

import runpy
import sys

import pytest

MOVED = {
    "benchmarks.learners": "agents.experiments.learners",
    "benchmarks.compare": "agents.experiments.compare",
    "benchmarks.eval": "agents.experiments.eval",
    "benchmarks.baseline": "agents.experiments.baseline",
    "benchmarks.signatures": "agents.experiments.signatures",
    "benchmarks.ranker_cold_start": "agents.experiments.ranker_cold_start",
    "benchmarks.trl_grpo": "agents.experiments.trl_grpo",
    "benchmarks.memory_plan": "agents.train.memory_plan",
    "benchmarks.fuzz": "tools.fuzz",
    "benchmarks.fuzz_index": "tools.fuzz_index",
    "benchmarks.restart": "tools.restart",
    "benchmarks.slowclients": "tools.slowclients",
}


# In one process the new module may already be imported (compare imports eval); `python -m` starts afresh.
@pytest.mark.filterwarnings("ignore:.*found in sys.modules after import of package:RuntimeWarning")
@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_command_names_the_new_one_and_runs_its_main(old, monkeypatch, capsys):
    new = MOVED[old]
    if new.startswith("tools.fuzz"):
        pytest.importorskip("hypothesis", reason="the fuzzers need hypothesis (the dev extra)")
    monkeypatch.setattr(sys, "argv", [old, "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(old, run_name="__main__", alter_sys=True)
    out, err = capsys.readouterr()
    assert exit_.value.code in (0, None)
    assert err.splitlines() == [f"python -m {old} is deprecated and goes in the next version: run python -m {new}"]
    assert out.startswith("usage: ")  # the new command's own --help, from its argument parser
