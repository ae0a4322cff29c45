"""Questions: chains walked over the relation tables, worded through the template tables as `QARecord`s
with gold annotations, and the oracle trajectory that solves them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from searchgym.data.records import QARecord
from searchgym.data.synthetic.config import QuestionConfig
from searchgym.data.synthetic.draws import STREAM_ASIDES, STREAM_QUESTIONS, stream_rng
from searchgym.data.synthetic.entities import Entity, EntityTable
from searchgym.data.synthetic.templates import (
    ASIDES,
    ASK,
    DESCRIBE,
    KIND_NOUN,
    RELATIONS,
    RELATIONS_OF,
    START_REF,
    relation_keyword,
    template_for,
)
from searchgym.errors import ConfigError

_MAX_FAILED_WALKS = 20_000  # consecutive failed or repeated walks before questions() gives up

SPLIT_CODES = {"train": 0, "test": 1, "validation": 2}
"""Each split's code: the mark of its start entities, and a key of its question stream."""


class ChainWalker:
    """Draws the questions of one world. Internal to the generator; use `SyntheticWorld.questions`."""

    def __init__(self, entities: EntityTable, relations: dict[str, dict[int, tuple[int, ...]]],
                 fact_section: dict[tuple[int, str], int], split_code: np.ndarray, world_seed: int):
        self._entities = entities
        self._relations = relations
        self._fact_section = fact_section
        self._split_code = split_code
        self._world_seed = world_seed

    def questions(self, config: QuestionConfig) -> list[QARecord]:
        """`config.num_questions` distinct questions; see `SyntheticWorld.questions`."""
        split_code = SPLIT_CODES[config.split]
        rng = stream_rng(self._world_seed, STREAM_QUESTIONS, config.seed, split_code)
        # Asides come from a stream of their own, so the chains and their wording are those drawn without them.
        aside_rng = stream_rng(self._world_seed, STREAM_ASIDES, config.seed, split_code) if config.aside_rate else None
        starts = np.flatnonzero(self._split_code == split_code)
        starts = np.array([s for s in starts.tolist() if self._steps(int(s), (int(s),))], dtype=np.int64)
        if len(starts) == 0:
            raise ConfigError(f"the {config.split} split of this world has no usable start entity; "
                              "use a larger WorldConfig.num_entities")
        records: list[QARecord] = []
        seen: set[tuple[int, ...]] = set()
        # Random walks rarely fail or repeat in a world of useful size; a long run of failures means the
        # split has run out of distinct chains of the requested length.
        failures = 0
        while len(records) < config.num_questions:
            hops = config.hops[len(records) % len(config.hops)]
            if failures > _MAX_FAILED_WALKS:
                raise ConfigError(
                    f"could build only {len(records)} of {config.num_questions} distinct {config.split} questions "
                    f"with hops {config.hops} from a world of {len(self._entities)} entities; use a larger "
                    "WorldConfig.num_entities, fewer questions or other hop counts"
                )
            failures += 1
            chain = self._walk(rng, int(starts[rng.integers(len(starts))]), hops)
            if chain is None:
                continue
            path, rels = chain
            key = tuple(path) + tuple(RELATIONS.index(r) for r in rels)
            if key in seen:
                continue
            record = self._record(rng, path, rels, config, len(records))
            if record is None:
                continue
            if aside_rng is not None and aside_rng.random() < config.aside_rate:
                record = self._with_aside(aside_rng, record, path, rels)
            seen.add(key)
            records.append(record)
            failures = 0
        return records

    def _steps(self, entity: int, visited: tuple[int, ...]) -> list[tuple[str, int]]:
        """(relation, object) pairs usable as the next hop: a single object not yet on the chain."""
        out = []
        for rel in RELATIONS_OF[self._entities[entity].kind]:
            objs = self._relations[rel].get(entity, ())
            if len(objs) == 1 and objs[0] not in visited:
                out.append((rel, objs[0]))
        return out

    def _walk(self, rng: np.random.Generator, start: int, hops: int) -> tuple[list[int], list[str]] | None:
        path, rels = [start], []
        for _ in range(hops):
            steps = self._steps(path[-1], tuple(path))
            if not steps:
                return None
            rel, obj = steps[int(rng.integers(len(steps)))]
            path.append(obj)
            rels.append(rel)
        return path, rels

    def _record(self, rng: np.random.Generator, path: list[int], rels: list[str], config: QuestionConfig,
                number: int) -> QARecord | None:
        ents = [self._entities[i] for i in path]
        start = ents[0]
        desc = START_REF.get(start.kind, "{N}").format(N=start.name)
        # Inner forms ("the city where {S} was born") only around a name or around one tail phrase.
        inner_ok = True
        for i, rel in enumerate(rels[:-1]):
            forms = template_for(DESCRIBE, rel, ents[i].kind)
            options = forms["tail"] + (forms["inner"] if inner_ok else ())
            choice = options[int(rng.integers(len(options)))]
            used_inner = choice in forms["inner"]
            inner_ok = i == 0 and not used_inner
            desc = choice.format(S=desc, objnoun=KIND_NOUN[ents[i + 1].kind])
        forms = template_for(ASK, rels[-1], ents[-2].kind)
        asks = forms["tail"] + (forms["inner"] if inner_ok else ())
        question = asks[int(rng.integers(len(asks)))].format(S=desc, objnoun=KIND_NOUN[ents[-1].kind])
        answer = ents[-1]
        # A twin's name can contain the answer's name ("New Halvex" vs "Halvex"): never give it away.
        if answer.name.lower() in question.lower():
            return None
        gold_docs = tuple(f"{ents[i].id}-{self._fact_section[(path[i], rel)]}" for i, rel in enumerate(rels))
        return QARecord(
            id=f"synthetic-{config.split}-{number:06d}",
            question=question,
            answers=(answer.name, *answer.aliases),
            gold_entities=tuple(e.name for e in ents[1:]),
            gold_docs=gold_docs,
            gold_titles=tuple(e.name for e in ents[:-1]),
            hops=len(rels),
            source="synthetic",
            metadata={
                "chain": list(rels),
                "split": config.split,
                "path_ids": [e.id for e in ents],
                "path_names": [e.name for e in ents],
                "path_kinds": [e.kind for e in ents],
                "world_seed": self._world_seed,
                "question_seed": config.seed,
            },
        )


    def _with_aside(self, rng: np.random.Generator, record: QARecord, path: list[int], rels: list[str]) -> QARecord:
        """`record` with an aside before its question: another fact of the start entity, whose object is on
        no hop of the chain and is not named by the question; unchanged when the start has no such fact."""
        start = self._entities[path[0]]
        options = []
        for rel in RELATIONS_OF[start.kind]:
            objs = self._relations[rel].get(path[0], ())
            if rel == rels[0] or len(objs) != 1 or objs[0] in path:
                continue
            obj = self._entities[objs[0]]
            if obj.name.lower() in record.question.lower() or any(a.lower() in obj.name.lower() for a in record.answers):
                continue
            options.append((rel, obj))
        if not options:
            return record
        rel, obj = options[int(rng.integers(len(options)))]
        text = _aside_text(rel, start, obj)
        metadata = {**record.metadata, "aside": {"relation": rel, "id": obj.id, "name": obj.name}}
        return replace(record, question=f"{text} {record.question}", metadata=metadata)


def _aside_text(relation: str, start: Entity, obj: Entity) -> str:
    ref = START_REF.get(start.kind, "{N}").format(N=start.name)
    text = template_for(ASIDES, relation, start.kind).format(S=ref, O=obj.name)
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------------------------------------------------
# Oracle
# ---------------------------------------------------------------------------------------------------------


def oracle_query(name: str, relation: str, subject_kind: str) -> str:
    """The search query for `relation` of the entity `name`: its name and the relation's keyword."""
    return f"{name} {relation_keyword(relation, subject_kind)}"


def _phrase(relation: str, subject_kind: str, object_kind: str, subject_name: str) -> str:
    ref = START_REF.get(subject_kind, "{N}").format(N=subject_name)
    return template_for(DESCRIBE, relation, subject_kind)["tail"][0].format(S=ref, objnoun=KIND_NOUN[object_kind])


def oracle_trajectory(record: QARecord) -> list[str]:
    """The turns of an agent that solves a synthetic `record` in Search-R1 tag format.

    One turn per hop, `<think>...</think>\\n<search>NAME KEYWORD</search>`, where NAME is the entity found
    so far and KEYWORD names the relation as the fact's passage words it, then a final
    `<think>...</think>\\n<answer>ANSWER</answer>`. A question with an aside (`QuestionConfig.aside_rate`)
    first searches the aside's entity by name: a round that finds nothing the question needs. Needs the
    `metadata` a `SyntheticWorld` writes.
    """
    meta = record.metadata
    try:
        rels, names, kinds = list(meta["chain"]), list(meta["path_names"]), list(meta["path_kinds"])
    except KeyError as exc:
        raise ConfigError(f"record {record.id!r} lacks synthetic metadata {exc}; only records made by "
                          "SyntheticWorld.questions have an oracle trajectory") from None
    turns = []
    aside = meta.get("aside")
    if aside:
        turns.append(f"<think>The question mentions {aside['name']}. Let me look that up first.</think>\n"
                     f"<search>{aside['name']}</search>")
    for i, rel in enumerate(rels):
        need = _phrase(rel, kinds[i], kinds[i + 1], names[i])
        if i == 0:
            plan = f"The question takes {len(rels)} step{'s' if len(rels) > 1 else ''}. " if len(rels) > 1 else ""
            detour = f"{aside['name']} is not what the question asks about. " if aside else ""
            think = f"{detour}{plan}First I need {need}."
        else:
            found = _phrase(rels[i - 1], kinds[i - 1], kinds[i], names[i - 1])
            think = f"The search result says {found} is {names[i]}. Next I need {need}."
        turns.append(f"<think>{think}</think>\n<search>{oracle_query(names[i], rel, kinds[i])}</search>")
    last = _phrase(rels[-1], kinds[-2], kinds[-1], names[-2])
    turns.append(f"<think>The search result says {last} is {names[-1]}.</think>\n"
                 f"<answer>{record.answers[0]}</answer>")
    return turns
