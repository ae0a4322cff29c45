"""The configs of a synthetic world (`WorldConfig`) and of its question draws (`QuestionConfig`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from searchgym.errors import ConfigError

Split = Literal["train", "test", "validation"]
"""Which questions of a world: the training entities', the held-out ones', or (in a world with
`WorldConfig.validation_fraction` > 0) those of the entities held out for choosing settings."""

MIN_ENTITIES = 100
"""Smallest world: below this some entity kinds would have a single member and chains dry up."""
MAX_ENTITIES = 5_000_000


def _check_int(owner: str, name: str, value: Any, low: int, high: int | None, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{owner}.{name} must be an int, got {type(value).__name__} {value!r}; {hint}")
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{owner}.{name} must be {bounds}, got {value}; {hint}")


def _check_float(owner: str, name: str, value: Any, low: float, high: float, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ConfigError(f"{owner}.{name} must be a number, got {type(value).__name__} {value!r}; {hint}")
    if not (low <= float(value) <= high):
        raise ConfigError(f"{owner}.{name} must be between {low} and {high}, got {value}; {hint}")


@dataclass(frozen=True)
class WorldConfig:
    """The size and seed of a synthetic world."""

    num_entities: int = 2000
    """Total number of entities, twins included. The corpus has `num_entities * passages_per_entity`
    passages; `WorldConfig.for_passages` sizes a world by passage count."""
    seed: int = 0
    """Seed of every random draw; equal configs give byte-identical worlds in any process."""
    distractor_rate: float = 0.15
    """Share of the non-twin entities that get a confusable twin (counted within `num_entities`): a
    same-kind entity with a near-identical name and independently drawn facts. 0 disables twins."""
    passages_per_entity: int = 3
    """Passages per entity: an overview and two fact-bearing sections; passages beyond the third hold
    filler only (more text to search through, no more facts)."""
    test_fraction: float = 0.2
    """Share of the entities reserved as start entities of the test split; the rest start train questions."""
    validation_fraction: float = 0.0
    """Share of the entities reserved as start entities of a validation split, taken from those that would
    otherwise start train questions (the test split is the same as without it): questions to choose a
    setting on, disjoint from train and test. 0 (the default) has no validation split."""
    decoy_rate: float = 0.0
    """Share of the facts (an entity's relation) whose keyword also appears in every other passage of the
    entity, in a decoy sentence that states nothing about the relation (`filler.DECOYS`). A lexical query
    "<name> <keyword>" then matches all of the entity's passages alike, and which one a retriever puts first
    no longer tells which states the fact: retrieval becomes the bottleneck a reader (a ranker) can fix.
    0 (the default) keeps each keyword in its fact's passage only."""

    def __post_init__(self) -> None:
        owner = "WorldConfig"
        _check_int(owner, "num_entities", self.num_entities, MIN_ENTITIES, MAX_ENTITIES,
                   f"a world needs at least {MIN_ENTITIES} entities to hold every entity kind "
                   "(use WorldConfig.for_passages(n) to size it by passage count)")
        _check_int(owner, "seed", self.seed, 0, None, "use a non-negative int such as 0")
        _check_float(owner, "distractor_rate", self.distractor_rate, 0.0, 0.5,
                     "use 0 for no twins or e.g. 0.15 for the default share")
        _check_int(owner, "passages_per_entity", self.passages_per_entity, 3, 6,
                   "three sections hold the facts; extra passages (up to 6) add filler")
        _check_float(owner, "test_fraction", self.test_fraction, 0.05, 0.5,
                     "the test split takes this share of the start entities, e.g. 0.2")
        _check_float(owner, "validation_fraction", self.validation_fraction, 0.0, 0.3,
                     "use 0 for no validation split or e.g. 0.1")
        _check_float(owner, "decoy_rate", self.decoy_rate, 0.0, 1.0, "use 0 for no decoy sentences or e.g. 0.5")

    @classmethod
    def for_passages(cls, num_passages: int, **kwargs: Any) -> WorldConfig:
        """The smallest world with at least `num_passages` passages (other fields from `kwargs`).

        >>> WorldConfig.for_passages(100_000).num_entities
        33334
        """
        per = kwargs.get("passages_per_entity", cls.passages_per_entity)
        _check_int("WorldConfig.for_passages", "passages_per_entity", per, 3, 6, "use 3 to 6")
        _check_int("WorldConfig.for_passages", "num_passages", num_passages, MIN_ENTITIES * per,
                   MAX_ENTITIES * per, "the world needs at least that many passages")
        return cls(num_entities=math.ceil(num_passages / per), **kwargs)

    @property
    def num_passages(self) -> int:
        """Passages in the corpus of this world."""
        return self.num_entities * self.passages_per_entity


@dataclass(frozen=True)
class QuestionConfig:
    """Which questions to draw from a world."""

    hops: int | tuple[int, ...] = (1, 2, 3)
    """Hop count(s), each 1 to 4; question i has `hops[i % len(hops)]` hops, so every count is represented
    in equal shares. Normalised to a sorted tuple."""
    num_questions: int = 1000
    """How many distinct questions (distinct start entity and relation chain) to return."""
    split: Split = "train"
    """Which partition of start entities the questions start from; the partitions are disjoint."""
    seed: int = 0
    """Seed of the question draws (independent of the world seed)."""
    aside_rate: float = 0.0
    """Share of the questions that open with an aside: a sentence stating another fact of the start entity,
    off the question's chain ("Maren Quist is married to Tobin Vale. In which city was Maren Quist born?"),
    whose entity a search can look up for nothing. Their oracle trajectory takes that detour first (a
    search round that contributes nothing), as an agent that searches every name it reads would. 0 (the
    default) draws the same questions as before the option existed."""

    def __post_init__(self) -> None:
        owner = "QuestionConfig"
        hops = self.hops
        if isinstance(hops, (int, np.integer)) and not isinstance(hops, bool):
            hops = (int(hops),)
        if isinstance(hops, (str, bytes)) or not isinstance(hops, Iterable):
            raise ConfigError(f"{owner}.hops must be an int or a tuple of ints from 1 to 4, got {self.hops!r}")
        hops = tuple(hops)
        if not hops:
            raise ConfigError(f"{owner}.hops is empty; give at least one hop count from 1 to 4, e.g. (1, 2, 3)")
        for h in hops:
            if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 1 <= h <= 4:
                raise ConfigError(f"{owner}.hops must hold ints from 1 to 4, got {self.hops!r}")
        object.__setattr__(self, "hops", tuple(sorted({int(h) for h in hops})))
        _check_int(owner, "num_questions", self.num_questions, 1, None, "ask for at least one question")
        if self.split not in get_args(Split):
            raise ConfigError(f"{owner}.split must be 'train', 'test' or 'validation', got {self.split!r}")
        _check_int(owner, "seed", self.seed, 0, None, "use a non-negative int such as 0")
        _check_float(owner, "aside_rate", self.aside_rate, 0.0, 1.0, "use 0 for no asides or e.g. 1.0 for every question")
