"""Training: the loop, checkpoints, the cold-start step. Learners come from `agents.learners.registry`."""

from agents.train.config import TrainConfig

__all__ = ["TrainConfig"]
