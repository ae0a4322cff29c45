"""Training: the loop, checkpoints, the cold-start step and COSEARCH's trainable ranker."""

from agents.train.config import LEARNERS, TrainConfig

__all__ = ["LEARNERS", "TrainConfig"]
