"""Bridges from searchgym environments and the project's rollout engine to other RL libraries.

- `agents.integrations.trl`: TRL's `GRPOTrainer` trained on multi-turn searchgym episodes (needs
  `pip install "searchgym[agents,trl]"`).

Importing this package imports nothing heavy; each integration module imports its library when used.
"""
