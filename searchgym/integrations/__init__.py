"""Bridges from searchgym environments to other RL libraries.

- `searchgym.integrations.trl`: TRL's `GRPOTrainer` trained on multi-turn searchgym episodes (needs
  `pip install "searchgym[agents,trl]"`).

Importing this package imports nothing heavy; each integration module imports its library when used.
"""
