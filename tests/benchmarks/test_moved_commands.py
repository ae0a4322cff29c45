"""The commands that moved out of `benchmarks/` still run under their old names for one version: each alias
prints one deprecation line naming the new command on stderr and runs the new command's `main`."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.slow
def test_each_old_command_names_the_new_one_and_runs_its_main():
    """`python -m OLD --help`, each in a fresh process as a user runs it (in this one, pytest's import hooks
    may already hold the new module), all started at once: exit 0, the new command's own usage on stdout,
    and on stderr first the line naming the new command. The fuzzers need hypothesis (the dev extra)."""
    fuzzers = importlib.util.find_spec("hypothesis") is not None
    commands = {old: new for old, new in MOVED.items() if fuzzers or not new.startswith("tools.fuzz")}
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    runs = {old: subprocess.Popen([sys.executable, "-m", old, "--help"], cwd=root, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for old in commands}
    try:
        for old, proc in runs.items():
            out, err = proc.communicate(timeout=240)
            line = f"python -m {old} is deprecated and goes in the next version: run python -m {commands[old]}"
            assert proc.returncode == 0, (old, err)
            assert err.splitlines()[0] == line and err.count(line) == 1, (old, err)  # then any library warnings
            assert out.startswith("usage: "), (old, out[:200])  # the new command's own --help, from its argument parser
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
