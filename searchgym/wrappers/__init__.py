"""Gymnasium wrappers over searchgym's text envs.

Adapters for classic RL libraries (stable-baselines3 and anything else that wants a vector observation
and a `Discrete` action space):

- `DiscreteCandidateActions`: the text action becomes a choice among candidate searches and answers
  derived from the question and the documents shown (`searchgym.wrappers.candidates`).
- `HashedFeatureObservation`: the text observation becomes a fixed-size vector of hashed words, turn
  counters and per-slot candidate features.
- `TurnLimitAsTerminal`: running out of turns becomes a terminal step (no bootstrapping past the limit).
- `wrap_for_sb3(env)`: all three, in the right order.

>>> import gymnasium as gym, searchgym
>>> from searchgym.wrappers import wrap_for_sb3
>>> env = wrap_for_sb3(gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=1, num_questions=50,
...                              cache_dir=False))
>>> obs, info = env.reset(seed=0)
>>> obs.shape, env.action_space
((371,), Discrete(18))

Nothing here imports stable-baselines3.
"""

from __future__ import annotations

import gymnasium as gym

from searchgym.wrappers.candidates import Candidate, CandidateSet, DocView, Evidence, SearchView, build_candidates
from searchgym.wrappers.discrete import DiscreteActionConfig, DiscreteCandidateActions
from searchgym.wrappers.features import SLOT_FEATURES, FeatureConfig, HashedFeatureObservation, hash_words
from searchgym.wrappers.turns import TurnLimitAsTerminal


def wrap_for_sb3(
    env: gym.Env,
    actions: DiscreteActionConfig | None = None,
    features: FeatureConfig | None = None,
    *,
    turn_limit_terminal: bool = True,
) -> gym.Env:
    """`TurnLimitAsTerminal(HashedFeatureObservation(DiscreteCandidateActions(env)))`: a `Box` observation
    and a `Discrete` action space, which stable-baselines3's `check_env` accepts. `turn_limit_terminal=False`
    leaves the env's `truncated` as it is (see `TurnLimitAsTerminal` for why it is on by default)."""
    wrapped: gym.Env = HashedFeatureObservation(DiscreteCandidateActions(env, actions), features)
    return TurnLimitAsTerminal(wrapped) if turn_limit_terminal else wrapped


__all__ = [
    "SLOT_FEATURES",
    "Candidate",
    "CandidateSet",
    "DiscreteActionConfig",
    "DiscreteCandidateActions",
    "DocView",
    "Evidence",
    "FeatureConfig",
    "HashedFeatureObservation",
    "SearchView",
    "TurnLimitAsTerminal",
    "build_candidates",
    "hash_words",
    "wrap_for_sb3",
]
