"""The reference learners, one module each over `agents.core`: their pure rules (rewards, advantages,
groups, masks) and configs. Each module's docstring lists how it differs from plain GRPO, and each
registers itself by name in `agents.learners.registry`, where the trainer finds it.

- `grpo`: outcome reward (EM), one advantage per trajectory.
- `cw_grpo`: per-round advantages weighted by the judge's contribution labels.
- `e_grpo`: partial credit for wrong answers from the gold-entity match rate.
- `cosearch`: a generative ranker trained alongside the agent on clustered ranker calls
  (its trainer, the learner's second model, in `cosearch_ranker`).
"""

from agents.learners.cosearch import CoSearchConfig
from agents.learners.cw_grpo import CWGRPOConfig
from agents.learners.e_grpo import EGRPOConfig
from agents.learners.grpo import GRPOConfig
from agents.learners.registry import EnvNeeds, LearnerSpec, get_learner, learner_names, register_learner

__all__ = ["CWGRPOConfig", "CoSearchConfig", "EGRPOConfig", "EnvNeeds", "GRPOConfig", "LearnerSpec", "get_learner",
           "learner_names", "register_learner"]
