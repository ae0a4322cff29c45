"""Passages: per entity an overview and fact sections, padded with filler to one drawn length.

Every relation of an entity is stated in exactly one of its passages (`FACT_SECTION`), in a sentence that
holds the relation's keyword; the rest is filler (`filler.py`). In a world with decoys
(`WorldConfig.decoy_rate`), a chosen fact's keyword is also in each other passage of the entity, in a decoy
sentence (`filler.DECOYS`) that states nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from searchgym.corpus.corpus import Document
from searchgym.data.synthetic.config import WorldConfig
from searchgym.data.synthetic.draws import STREAM_DECOYS, STREAM_TEXT, Draws, stream_rng
from searchgym.data.synthetic.entities import EntityTable
from searchgym.data.synthetic.filler import (
    BODY_SUBJECT,
    DECOYS,
    FILLER_GROUP,
    FILLER_ORDERS,
    FILLERS,
    INTROS,
    NUMERIC_SLOTS,
    PRONOUNS,
    SLOTS,
)
from searchgym.data.synthetic.names import VOWELS
from searchgym.data.synthetic.templates import FACT_SECTION, FACT_TEMPLATES, RELATIONS, RELATIONS_OF, template_for


class _Slots(dict):
    """`str.format_map` mapping: fixed keys first, then a fresh draw from `SLOTS` for any other name."""

    def __init__(self, fixed: Mapping[str, Any], draws: Draws):
        super().__init__(fixed)
        self._draws = draws

    def __missing__(self, key: str) -> str:
        if key in SLOTS:
            return self._draws.pick(SLOTS[key])
        if key in NUMERIC_SLOTS:
            low, high, step = NUMERIC_SLOTS[key]
            value = self._draws.integer(low, high, step)
            return f"{value:,}" if value >= 10_000 else str(value)
        raise KeyError(key)


def _with_article(noun: str) -> str:
    return ("an " if noun[0] in VOWELS else "a ") + noun


class PassageWriter:
    """Writes the passages of a world's entities. Internal to the generator; `WorldBuilder` uses it."""

    def __init__(self, config: WorldConfig):
        self.config = config
        # Approximate word counts (a slot counts as one word) and a few fixed random orders per filler pool.
        self._filler_words = {g: [len(t.split()) for t in pool] for g, pool in FILLERS.items()}
        order_rng = stream_rng(config.seed, STREAM_TEXT, 1)
        self._filler_orders = {g: [order_rng.permutation(len(pool)).tolist() for _ in range(FILLER_ORDERS)]
                               for g, pool in FILLERS.items()}

    def passages(self, entities: EntityTable, relations: dict[str, dict[int, tuple[int, ...]]],
                 attrs: list[dict[str, Any]]) -> tuple[list[Document], dict[tuple[int, str], int]]:
        """Every passage of every entity in entity order, and the section stating each (entity, relation)."""
        per = self.config.passages_per_entity
        rng = stream_rng(self.config.seed, STREAM_TEXT)
        # Objects a person is credited with, for the overview's list of works.
        credits: dict[int, list[int]] = {}
        for w, (c,) in relations["created_by"].items():
            credits.setdefault(c, []).append(w)
        docs: list[Document] = []
        fact_section: dict[tuple[int, str], int] = {}
        # Drawn only in a world with decoys, from a stream of its own: a world without is what it always was.
        decoy_rng = stream_rng(self.config.seed, STREAM_DECOYS) if self.config.decoy_rate else None
        chunk = 4096
        for start in range(0, len(entities), chunk):
            n = min(chunk, len(entities) - start)
            rows = rng.random((n, 160)).tolist()
            decoys = (decoy_rng.random((n, len(RELATIONS))) < self.config.decoy_rate).tolist() if decoy_rng else None
            for offset, row in enumerate(rows):
                i = start + offset
                chosen = () if decoys is None else tuple(r for r, on in zip(RELATIONS, decoys[offset]) if on)
                texts = self._entity_texts(i, entities, relations, attrs, credits, Draws(row), per, fact_section, chosen)
                ent = entities[i]
                docs.extend(Document(f"{ent.id}-{k}", ent.name, text) for k, text in enumerate(texts))
        return docs, fact_section

    def _entity_texts(self, i: int, entities: EntityTable, relations: dict[str, dict[int, tuple[int, ...]]],
                      attrs: list[dict[str, Any]], credits: dict[int, list[int]], draws: Draws, per: int,
                      fact_section: dict[tuple[int, str], int], decoyed: tuple[str, ...] = ()) -> list[str]:
        ent = entities[i]
        kind = ent.kind
        attr = attrs[i]
        pronoun = attr.get("pronoun", "it")
        pron, obj, poss = PRONOUNS[pronoun]
        fixed = {"pron": pron, "obj": obj, "poss": poss, **{k: v for k, v in attr.items() if isinstance(v, str)}}
        fixed["year"] = attr.get("year", attr.get("founding_year", ""))
        if "occupation" in attr:
            fixed["a_occupation"] = _with_article(attr["occupation"])
        alias = ent.aliases[0] if ent.aliases else None
        if kind == "country":
            fixed["formal"] = attr.get("formal", f"Republic of {ent.name}")

        def body_subject() -> tuple[str, str]:
            if pronoun in ("he", "she"):
                return pron.capitalize(), poss.capitalize()
            return draws.pick(BODY_SUBJECT[kind]), "Its"

        def lead_subject() -> tuple[str, str]:
            return ent.name, ent.name + ("'" if ent.name.endswith("s") else "'s")

        def render(template: str, lead: bool, extra: Mapping[str, Any] | None = None) -> str:
            s, p = lead_subject() if lead else body_subject()
            values = {**fixed, "S": s, "Poss": p, **(extra or {})}
            return template.format_map(_Slots(values, draws))

        # Per entity one target length, so its passages have nearly equal lengths and BM25's length
        # normalisation does not favour one of them over the fact's passage.
        target = 50 + draws.index(46)
        group = FILLER_GROUP[kind]
        fillers, lengths = FILLERS[group], self._filler_words[group]
        # One random order of the fillers per entity, walked across its passages, so that its passages do
        # not repeat each other until the pool is used up.
        order = self._filler_orders[group][draws.index(FILLER_ORDERS)]
        cursor = draws.index(len(order))
        sections: list[list[str]] = [[] for _ in range(per)]

        facts_by_section: dict[int, list[str]] = {}
        decoys_by_section: dict[int, list[str]] = {}
        for rel in RELATIONS_OF[kind]:
            if relations[rel].get(i):
                facts_by_section.setdefault(FACT_SECTION[rel], []).append(rel)
                if rel in decoyed:
                    for k in range(per):
                        if k != FACT_SECTION[rel]:
                            decoys_by_section.setdefault(k, []).append(rel)

        for k in range(per):
            sentences = sections[k]
            if k == 0 and kind in INTROS:
                sentences.append(render(draws.pick(INTROS[kind]), True))
                if alias is not None and kind == "company":
                    sentences.append(f"It is often known by the abbreviation {alias}.")
                if kind == "person" and i in credits:
                    titles = [entities[w].name for w in credits[i][:3]]
                    listed = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
                    sentences.append(f"{poss.capitalize()} best-known pieces include {listed}.")
                if kind == "city" and attr.get("is_capital"):
                    sentences.append("It is the seat of the national government.")
            for rel in facts_by_section.get(k, ()):
                sentences.append(self._fact_sentence(rel, kind, relations[rel][i], entities, attrs, attr, draws,
                                                     lead=not sentences, render=render))
                fact_section[(i, rel)] = k
            for rel in decoys_by_section.get(k, ()):
                # The opening sentence names the entity, as in every passage: a decoy that opens one leads with the name.
                sentences.append(render(draws.pick(template_for(DECOYS, rel, kind)), not sentences))
            count = sum(len(s.split()) for s in sentences)
            for _ in range(len(order)):
                if sentences and count >= target - 4:
                    break
                j = order[cursor % len(order)]
                cursor += 1
                # A passage without intro or fact opens with a filler that names the entity.
                if not sentences and not fillers[j].startswith(("{S}", "{Poss}")):
                    continue
                if count + lengths[j] > target + 6:
                    continue
                text = render(fillers[j], not sentences)
                sentences.append(text)
                count += len(text.split())
        return [" ".join(s) for s in sections]

    @staticmethod
    def _fact_sentence(rel: str, kind: str, objs: tuple[int, ...], entities: EntityTable,
                       attrs: list[dict[str, Any]], attr: Mapping[str, Any], draws: Draws, lead: bool,
                       render: Callable[..., str]) -> str:
        names = [entities[o].name for o in objs]
        if len(objs) == 1:
            templates = template_for(FACT_TEMPLATES, rel, kind)
            obj_text = names[0]
        else:
            templates = template_for(FACT_TEMPLATES, f"{rel}/2", kind)
            obj_text = ", ".join(names[:-1]) + " and " + names[-1]
        if rel == "born_in":
            year = attr["birth_year"]
        elif rel == "spouse":
            year = attr["married_year"]
        elif rel == "founded":
            year = attrs[objs[0]]["founding_year"]
        elif rel == "educated_at":
            year = attr["birth_year"] + 21 + draws.index(4)
        elif rel == "employer":
            year = attr["birth_year"] + 24 + draws.index(20)
        elif rel == "mayor":
            year = min(attrs[objs[0]]["birth_year"] + 35 + draws.index(25), 2020)
        elif rel == "headquartered_in":
            year = attr["founding_year"] + draws.index(30)
        else:
            year = attr.get("year", attr.get("founding_year", ""))
        return render(draws.pick(templates), lead, {"O": obj_text, "year": year})
