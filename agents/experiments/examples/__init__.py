"""Agents to benchmark with `python -m agents.experiments.compare` (docs/benchmark-your-agent.md)."""
