"""Agents to benchmark with `python -m benchmarks.compare` (docs/benchmark-your-agent.md)."""
