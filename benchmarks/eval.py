"""Moved: `python -m agents.experiments.eval`. This alias, kept for one version, says so on stderr and runs it."""

from benchmarks._moved import run_moved

if __name__ == "__main__":
    run_moved("benchmarks.eval", "agents.experiments.eval")
