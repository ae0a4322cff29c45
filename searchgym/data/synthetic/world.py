"""`SyntheticWorld`: generation, read access to the world's tables and corpus, and question drawing;
`make_synthetic`, the one-call convenience."""

from __future__ import annotations

import logging
import time
import numpy as np

from searchgym.corpus.corpus import Corpus
from searchgym.data.records import QARecord
from searchgym.data.synthetic.builder import WorldBuilder
from searchgym.data.synthetic.config import QuestionConfig, Split, WorldConfig
from searchgym.data.synthetic.entities import EntityTable
from searchgym.data.synthetic.questions import SPLIT_CODES, ChainWalker, oracle_trajectory
from searchgym.data.synthetic.templates import RELATIONS
from searchgym.errors import ConfigError

logger = logging.getLogger("searchgym.data.synthetic")  # the package's name, as before it was split


class SyntheticWorld:
    """A generated world: entities, relations, the corpus of passages, and a question generator.

    Build with `SyntheticWorld.generate(WorldConfig(...))`.
    """

    def __init__(
        self,
        config: WorldConfig,
        entities: EntityTable,
        relations: dict[str, dict[int, tuple[int, ...]]],
        corpus: Corpus,
        fact_section: dict[tuple[int, str], int],
        test_starts: np.ndarray,
        validation_starts: np.ndarray | None = None,
    ):
        self.config = config
        self._entities = entities
        self._relations = relations
        self._corpus = corpus
        self._fact_section = fact_section
        self._split_code = np.zeros(len(entities), dtype=np.int8)
        """Per entity, the split its questions start in: `SPLIT_CODES` (train 0, test 1, validation 2)."""
        self._split_code[test_starts] = SPLIT_CODES["test"]
        if validation_starts is not None:
            self._split_code[validation_starts] = SPLIT_CODES["validation"]

    # -- construction ------------------------------------------------------------------------------------

    @classmethod
    def generate(cls, config: WorldConfig | None = None) -> SyntheticWorld:
        """Generate the world described by `config` (default `WorldConfig()`)."""
        if config is None:
            config = WorldConfig()
        if not isinstance(config, WorldConfig):
            raise ConfigError(f"SyntheticWorld.generate expects a WorldConfig, got {type(config).__name__}")
        t0 = time.perf_counter()
        world = SyntheticWorld(config, *WorldBuilder(config).build())
        logger.debug("synthetic world: %d entities, %d passages in %.2fs", len(world.entities),
                     len(world.corpus), time.perf_counter() - t0)
        return world

    # -- read access -------------------------------------------------------------------------------------

    @property
    def corpus(self) -> Corpus:
        """Every passage of every entity, in entity order."""
        return self._corpus

    @property
    def entities(self) -> EntityTable:
        """The entities, read-only, in id order."""
        return self._entities

    def objects(self, entity_id: str, relation: str) -> tuple[str, ...]:
        """Ids of the objects of `relation` for subject `entity_id` (empty if none), from the relation tables."""
        if relation not in self._relations:
            raise ConfigError(f"unknown relation {relation!r}; relations are {', '.join(RELATIONS)}")
        objs = self._relations[relation].get(self._entities.index(entity_id), ())
        return tuple(self._entities[o].id for o in objs)

    def fact_doc(self, entity_id: str, relation: str) -> str | None:
        """Id of the passage of `entity_id` that states `relation`, or None if it has no such relation."""
        section = self._fact_section.get((self._entities.index(entity_id), relation))
        return None if section is None else f"{entity_id}-{section}"

    def split_of(self, entity_id: str) -> Split:
        """The split whose questions may start from `entity_id`."""
        code = int(self._split_code[self._entities.index(entity_id)])
        return next(name for name, c in SPLIT_CODES.items() if c == code)

    # -- questions ---------------------------------------------------------------------------------------

    def questions(self, config: QuestionConfig | None = None) -> list[QARecord]:
        """`config.num_questions` distinct questions of the requested hop counts and split.

        Raises ConfigError if the world cannot supply that many distinct chains (use a larger world or
        fewer questions).
        """
        if config is None:
            config = QuestionConfig()
        if not isinstance(config, QuestionConfig):
            raise ConfigError(f"SyntheticWorld.questions expects a QuestionConfig, got {type(config).__name__}")
        if config.split == "validation" and not self.config.validation_fraction:
            raise ConfigError("this world has no validation split: build it with WorldConfig(validation_fraction=...), "
                              "e.g. 0.1, or ask for the train or test split")
        return ChainWalker(self._entities, self._relations, self._fact_section, self._split_code,
                            self.config.seed).questions(config)

    def oracle_trajectory(self, record: QARecord) -> list[str]:
        """The agent turns that solve `record`; see the function `oracle_trajectory`."""
        return oracle_trajectory(record)

    def __repr__(self) -> str:
        return f"SyntheticWorld(entities={len(self._entities)}, passages={len(self._corpus)}, seed={self.config.seed})"


def make_synthetic(
    num_entities: int = 2000,
    seed: int = 0,
    hops: int | tuple[int, ...] = (1, 2, 3),
    split: Split = "train",
    num_questions: int = 1000,
) -> tuple[Corpus, list[QARecord]]:
    """The corpus and `num_questions` questions of the world `WorldConfig(num_entities, seed)`.

    `seed` seeds both the world and the question draws. (A validation split needs a world built with
    `WorldConfig(validation_fraction=...)`: use `SyntheticWorld` directly.)
    """
    world = SyntheticWorld.generate(WorldConfig(num_entities=num_entities, seed=seed))
    return world.corpus, world.questions(QuestionConfig(hops=hops, num_questions=num_questions, split=split,
                                                        seed=seed))
