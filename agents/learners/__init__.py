"""The reference learners, one module each over `agents.core`: their pure rules (rewards, advantages,
groups, masks), their configs and the policy loss each names. Each module's docstring lists how it differs
from plain GRPO, and each registers itself by name in `agents.learners.registry` when it is imported (one
name on the import line below), where the trainer and the CLI find it: `python -m agents train --help`
lists them with a line each, and docs/learners.md describes them.

COSEARCH's second trained model, its ranker, is in `cosearch_ranker`.
"""

# Importing a learner's module registers it: one name per learner on this line.
from agents.learners import cosearch, cw_grpo, dr_grpo, e_grpo, grpo, gspo  # noqa: F401
from agents.learners.cosearch import CoSearchConfig
from agents.learners.cw_grpo import CWGRPOConfig
from agents.learners.e_grpo import EGRPOConfig
from agents.learners.grpo import GRPOConfig
from agents.learners.registry import EnvNeeds, LearnerSpec, get_learner, learner_names, register_learner

__all__ = ["CWGRPOConfig", "CoSearchConfig", "EGRPOConfig", "EnvNeeds", "GRPOConfig", "LearnerSpec", "get_learner",
           "learner_names", "register_learner"]
