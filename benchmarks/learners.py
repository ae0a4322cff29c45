"""Moved: `python -m agents.experiments.learners`. This alias, kept for one version, says so on stderr and runs it."""

from benchmarks._moved import run_moved

if __name__ == "__main__":
    run_moved("benchmarks.learners", "agents.experiments.learners")
