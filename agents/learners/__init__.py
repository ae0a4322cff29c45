"""The reference learners, one module each over `agents.core`: their pure rules (rewards, advantages,
groups, masks) and configs. Each module's docstring lists how it differs from plain GRPO.

- `grpo`: outcome reward (EM), one advantage per trajectory.
- `cw_grpo`: per-round advantages weighted by the judge's contribution labels.
- `e_grpo`: partial credit for wrong answers from the gold-entity match rate.
- `cosearch`: a generative ranker trained alongside the agent on clustered ranker calls.
"""

from agents.learners.cosearch import CoSearchConfig
from agents.learners.cw_grpo import CWGRPOConfig
from agents.learners.e_grpo import EGRPOConfig
from agents.learners.grpo import GRPOConfig

__all__ = ["CWGRPOConfig", "CoSearchConfig", "EGRPOConfig", "GRPOConfig"]
