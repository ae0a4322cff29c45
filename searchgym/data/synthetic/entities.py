"""The world's entities: `Entity` and the read-only `EntityTable`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entity:
    """One entity of the world (read-only)."""

    id: str
    """Unique id, e.g. `person-000042`; its passages are `f"{id}-{k}"`."""
    name: str
    """Unique display name; also the title of its passages."""
    type: str
    """`person`, `place`, `organisation` or `work`."""
    kind: str
    """Finer kind: person, city, country, company, university, publisher, studio, label, book, film, album."""
    aliases: tuple[str, ...] = ()
    """Other accepted names (acronyms of companies, formal names of countries)."""
    twin_of: str | None = None
    """Id of the entity this one is a confusable twin of, if any."""
    attributes: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Descriptive attributes used in passages (birth year, occupation, genre, year...)."""


class EntityTable(Sequence[Entity]):
    """The world's entities in id order, with lookup by id and by name. Immutable."""

    def __init__(self, entities: Sequence[Entity]):
        self._entities = tuple(entities)
        self._by_id = {e.id: i for i, e in enumerate(self._entities)}
        self._by_name = {e.name: i for i, e in enumerate(self._entities)}

    def __len__(self) -> int:
        return len(self._entities)

    def __getitem__(self, i):  # type: ignore[override]
        return self._entities[i]

    def __iter__(self) -> Iterator[Entity]:
        return iter(self._entities)

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._by_id

    def get(self, entity_id: str) -> Entity:
        """The entity with id `entity_id`; KeyError if absent."""
        return self._entities[self._by_id[entity_id]]

    def by_name(self, name: str) -> Entity:
        """The entity named `name`; KeyError if absent."""
        return self._entities[self._by_name[name]]

    def index(self, entity_id: str) -> int:  # type: ignore[override]
        """Position of `entity_id`."""
        return self._by_id[entity_id]

    def __repr__(self) -> str:
        return f"EntityTable({len(self)} entities)"
