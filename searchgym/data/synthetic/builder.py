"""Draws a world in stages: names (`names.py`), relations and attributes (here), passages
(`passages.py`) and the train/test partition of start entities."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from searchgym.corpus.corpus import Corpus
from searchgym.data.synthetic.config import WorldConfig
from searchgym.data.synthetic.draws import STREAM_NAMES, STREAM_RELATIONS, STREAM_SPLIT, Draws, stream_rng
from searchgym.data.synthetic.entities import Entity, EntityTable
from searchgym.data.synthetic.filler import OCCUPATION_SHARES, OCCUPATIONS
from searchgym.data.synthetic.names import WordSource, draw_aliases, draw_names, twin_name
from searchgym.data.synthetic.passages import PassageWriter
from searchgym.data.synthetic.templates import (
    KIND_MINIMUM,
    KIND_SHARES,
    KIND_TYPE,
    ORG_KINDS,
    PUBLISHER_KIND,
    RELATIONS,
    WORK_KINDS,
)


class _WorldParts(NamedTuple):
    """What `WorldBuilder.build` draws: the arguments of `SyntheticWorld` after the config."""

    entities: EntityTable
    relations: dict[str, dict[int, tuple[int, ...]]]
    corpus: Corpus
    fact_section: dict[tuple[int, str], int]
    test_starts: np.ndarray
    validation_starts: np.ndarray


class WorldBuilder:
    """Draws a world in stages: names, relations, attributes, passages. Internal to the generator; use
    SyntheticWorld.generate."""

    def __init__(self, config: WorldConfig):
        self.config = config
        self.n = config.num_entities
        self._writer = PassageWriter(config)

    def _counts(self) -> tuple[dict[str, int], int]:
        n_base = round(self.n / (1.0 + self.config.distractor_rate))
        counts = {k: max(KIND_MINIMUM.get(k, 2), round(share * n_base)) for k, share in KIND_SHARES.items()}
        counts = {"person": n_base - sum(counts.values()), **counts}
        return counts, self.n - n_base

    def build(self) -> _WorldParts:
        cfg = self.config
        counts, n_twins = self._counts()
        name_rng = stream_rng(cfg.seed, STREAM_NAMES)
        words = WordSource(name_rng)
        keys: set[str] = set()

        kinds: list[str] = []
        names: list[str] = []
        for kind, count in counts.items():
            for name in draw_names(kind, count, words, name_rng, keys):
                kinds.append(kind)
                names.append(name)
        n_base = len(names)

        # Twins: confusable names of randomly chosen base entities.
        twin_of: list[int] = [-1] * n_base
        originals = name_rng.choice(n_base, size=n_twins, replace=False).tolist() if n_twins else []
        draws = Draws(name_rng.random(max(64, 24 * n_twins)).tolist())
        for orig in originals:
            twin = twin_name(kinds[orig], names[orig], draws, keys)
            if twin is None:  # no confusable variant free: a plain new entity of the kind keeps the count exact
                twin = draw_names(kinds[orig], 1, words, name_rng, keys)[0]
                twin_of.append(-1)
            else:
                twin_of.append(orig)
            kinds.append(kinds[orig])
            names.append(twin)

        # Shuffle so ids reveal neither kind blocks nor twins.
        order = name_rng.permutation(len(names)).tolist()
        position = [0] * len(order)
        for new, old in enumerate(order):
            position[old] = new
        kinds = [kinds[o] for o in order]
        names = [names[o] for o in order]
        twin_of = [position[twin_of[o]] if twin_of[o] >= 0 else -1 for o in order]

        by_kind: dict[str, np.ndarray] = {k: np.array([i for i, kk in enumerate(kinds) if kk == k], dtype=np.int64)
                                          for k in KIND_TYPE}
        rel_rng = stream_rng(cfg.seed, STREAM_RELATIONS)
        attrs: list[dict[str, Any]] = [{} for _ in kinds]
        relations = self._relations(rel_rng, kinds, by_kind, twin_of, attrs)
        aliases = draw_aliases(cfg.seed, names, kinds, attrs, keys)

        ids = [f"{kind}-{i:06d}" for i, kind in enumerate(kinds)]
        entities = EntityTable([
            Entity(
                id=ids[i],
                name=names[i],
                type=KIND_TYPE[kinds[i]],
                kind=kinds[i],
                aliases=aliases[i],
                twin_of=ids[twin_of[i]] if twin_of[i] >= 0 else None,
                attributes=MappingProxyType(attrs[i]),
            )
            for i in range(len(kinds))
        ])
        docs, fact_section = self._writer.passages(entities, relations, attrs)
        corpus = Corpus(docs, name=f"synthetic-{cfg.num_entities}-{cfg.seed}")

        split_order = stream_rng(cfg.seed, STREAM_SPLIT).permutation(len(kinds))
        n_test = round(cfg.test_fraction * len(kinds))
        test_starts = np.sort(split_order[:n_test])
        # Validation takes the entities after the test ones in the same order, so the test split stays put.
        validation_starts = np.sort(split_order[n_test: n_test + round(cfg.validation_fraction * len(kinds))])
        return _WorldParts(entities, relations, corpus, fact_section, test_starts, validation_starts)

    # -- relations and attributes ---------------------------------------------------------------------------

    def _relations(self, rng: np.random.Generator, kinds: list[str], by_kind: dict[str, np.ndarray],
                   twin_of: list[int], attrs: list[dict[str, Any]]) -> dict[str, dict[int, tuple[int, ...]]]:
        # The parts draw from `rng` in this order, which every world's bytes depend on.
        rel: dict[str, dict[int, tuple[int, ...]]] = {r: {} for r in RELATIONS}
        orgs = np.sort(np.concatenate([by_kind[k] for k in ORG_KINDS]))
        members = _people(rng, by_kind, orgs, rel, attrs)
        _places_orgs_works(rng, by_kind, orgs, members, rel, attrs)
        _separate_twins(rng, kinds, by_kind, members, twin_of, rel, attrs)
        _derived(rng, by_kind, orgs, rel, attrs)
        return rel


def _uniform(rng: np.random.Generator, pool: np.ndarray, size: int) -> list[int]:
    return pool[rng.integers(0, len(pool), size)].tolist()


def _people(rng: np.random.Generator, by_kind: dict[str, np.ndarray], orgs: np.ndarray, rel: dict[str, dict[int, tuple[int, ...]]],
            attrs: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Persons' attributes, birthplaces, employers, schools and marriages; the members of each occupation group."""
    persons, cities, universities = by_kind["person"], by_kind["city"], by_kind["university"]
    # Persons: birth year, pronoun, occupation group (creators of each work kind come from its group).
    n_p = len(persons)
    years = rng.integers(1820, 1961, n_p).tolist()  # founding and release years stay before 2021
    genders = (rng.random(n_p) < 0.5).tolist()
    groups = list(OCCUPATION_SHARES)
    group_idx = rng.choice(len(groups), size=n_p, p=list(OCCUPATION_SHARES.values()))
    group_idx[: len(groups)] = np.arange(len(groups))  # every group has at least one member
    occ_u = rng.random(n_p).tolist()
    members: dict[str, list[int]] = {g: [] for g in groups}
    for j, p in enumerate(persons.tolist()):
        group = groups[int(group_idx[j])]
        occupations = OCCUPATIONS[group]
        attrs[p].update(birth_year=years[j], pronoun="she" if genders[j] else "he", occupation_group=group,
                        occupation=occupations[min(int(occ_u[j] * len(occupations)), len(occupations) - 1)])
        members[group].append(p)

    born = _uniform(rng, cities, n_p)
    has_job, two_jobs = rng.random(n_p) < 0.62, rng.random(n_p) < 0.15
    jobs = rng.integers(0, len(orgs), (n_p, 2))
    has_school = rng.random(n_p) < 0.55
    school = _uniform(rng, universities, n_p)
    for j, p in enumerate(persons.tolist()):
        rel["born_in"][p] = (born[j],)
        if has_job[j]:
            first, second = int(orgs[jobs[j, 0]]), int(orgs[jobs[j, 1]])
            # Two employers make "the employer of X" ambiguous; the question walker skips such people.
            rel["employer"][p] = (first, second) if two_jobs[j] and first != second else (first,)
        if has_school[j]:
            rel["educated_at"][p] = (school[j],)

    # Marriages: random disjoint pairs.
    married = persons[rng.random(n_p) < 0.45]
    married = rng.permutation(married).tolist()
    for a, b in zip(married[0::2], married[1::2], strict=False):  # an odd one out stays single
        rel["spouse"][a], rel["spouse"][b] = (b,), (a,)
        year = max(attrs[a]["birth_year"], attrs[b]["birth_year"]) + int(rng.integers(20, 36))
        attrs[a]["married_year"] = attrs[b]["married_year"] = year
    return members


def _places_orgs_works(rng: np.random.Generator, by_kind: dict[str, np.ndarray], orgs: np.ndarray,
                       members: dict[str, list[int]], rel: dict[str, dict[int, tuple[int, ...]]], attrs: list[dict[str, Any]]) -> None:
    """Cities' countries and mayors; organisations' founders, years and headquarters; works' creators and publishers."""
    persons, cities, countries = by_kind["person"], by_kind["city"], by_kind["country"]
    # Cities: each country gets at least one city.
    city_list = rng.permutation(cities).tolist()
    country_of = countries.tolist() + _uniform(rng, countries, max(0, len(city_list) - len(countries)))
    for c, k in zip(city_list, country_of, strict=False):  # cities always outnumber countries
        rel["located_in"][c] = (k,)

    # Mayors: most cities have one, each a different person.
    has_mayor = (rng.random(len(cities)) < 0.7).tolist()
    mayors = rng.permutation(persons).tolist()
    for j, c in enumerate(cities.tolist()):
        if has_mayor[j] and j < len(mayors):
            rel["mayor"][c] = (mayors[j],)

    # Organisations: founder, founding year after the founder's 20th birthday, headquarters.
    founders = _uniform(rng, persons, len(orgs))
    hq = _uniform(rng, cities, len(orgs))
    gaps = rng.integers(22, 60, len(orgs)).tolist()
    for j, o in enumerate(orgs.tolist()):
        rel["founded_by"][o] = (founders[j],)
        rel["headquartered_in"][o] = (hq[j],)
        attrs[o]["founding_year"] = attrs[founders[j]]["birth_year"] + gaps[j]

    # Works: creator from the matching occupation group, publisher of the matching kind.
    for kind in WORK_KINDS:
        works = by_kind[kind]
        creators = np.array(members[kind], dtype=np.int64)
        made_by = _uniform(rng, creators, len(works))
        issued = _uniform(rng, by_kind[PUBLISHER_KIND[kind]], len(works))
        gaps = rng.integers(20, 56, len(works)).tolist()
        for j, w in enumerate(works.tolist()):
            rel["created_by"][w] = (made_by[j],)
            rel["published_by"][w] = (issued[j],)
            attrs[w]["year"] = attrs[made_by[j]]["birth_year"] + gaps[j]


def _separate_twins(rng: np.random.Generator, kinds: list[str], by_kind: dict[str, np.ndarray],
                    members: dict[str, list[int]], twin_of: list[int], rel: dict[str, dict[int, tuple[int, ...]]],
                    attrs: list[dict[str, Any]]) -> None:
    persons, cities, countries = by_kind["person"], by_kind["city"], by_kind["country"]
    universities = by_kind["university"]
    # Twins get their own facts: where a single-valued fact equals the original's, move it.
    candidates = {"born_in": lambda e: cities, "educated_at": lambda e: universities,
                  "headquartered_in": lambda e: cities, "founded_by": lambda e: persons,
                  "located_in": lambda e: countries,
                  "created_by": lambda e: np.array(members[kinds[e]], dtype=np.int64),
                  "published_by": lambda e: by_kind[PUBLISHER_KIND[kinds[e]]]}
    shift = rng.integers(1, 1 << 30, len(kinds)).tolist()
    for t, o in enumerate(twin_of):
        if o < 0:
            continue
        for r, pool_of in candidates.items():
            if t in rel[r] and rel[r][t] == rel[r].get(o):
                pool = pool_of(t).tolist()
                if len(pool) > 1:
                    here = pool.index(rel[r][t][0])
                    rel[r][t] = (pool[(here + 1 + shift[t] % (len(pool) - 1)) % len(pool)],)
        if "year" in attrs[t] and kinds[t] in WORK_KINDS:
            creator = rel["created_by"][t][0]
            attrs[t]["year"] = max(attrs[t]["year"], attrs[creator]["birth_year"] + 20)
        if "founding_year" in attrs[t]:
            founder = rel["founded_by"][t][0]
            attrs[t]["founding_year"] = max(attrs[t]["founding_year"], attrs[founder]["birth_year"] + 20)


def _derived(rng: np.random.Generator, by_kind: dict[str, np.ndarray], orgs: np.ndarray, rel: dict[str, dict[int, tuple[int, ...]]],
             attrs: list[dict[str, Any]]) -> None:
    cities, countries = by_kind["city"], by_kind["country"]
    # Derived relations: founded (inverse of founded_by), capital (one city of each country).
    for o in orgs.tolist():
        f = rel["founded_by"][o][0]
        rel["founded"][f] = (*rel["founded"].get(f, ()), o)
    cities_of: dict[int, list[int]] = {}
    for c in cities.tolist():
        cities_of.setdefault(rel["located_in"][c][0], []).append(c)
    capital_u = rng.random(len(countries)).tolist()
    for j, k in enumerate(countries.tolist()):
        own = cities_of.get(k)
        if own:
            cap = own[min(int(capital_u[j] * len(own)), len(own) - 1)]
            rel["capital"][k] = (cap,)
            attrs[cap]["is_capital"] = True
