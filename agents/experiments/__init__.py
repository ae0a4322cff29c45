"""Experiments with the reference learners: the reference comparison and learning check
(`python -m agents.experiments.learners`), and the tools that evaluate and compare agents against it."""
