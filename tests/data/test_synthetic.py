"""Tests of the synthetic world: determinism, splits, gold annotations, answer uniqueness, oracle."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from searchgym.data.records import QARecord
from searchgym.data.synthetic import (
    RELATIONS,
    QuestionConfig,
    SyntheticWorld,
    WorldConfig,
    make_synthetic,
    oracle_trajectory,
    relation_keyword,
)
from searchgym.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
TOKEN = re.compile(r"(?u)\b\w\w+\b")
TURN = re.compile(r"\A<think>[^<>]+</think>\n<(search|answer)>([^<>]+)</\1>\Z")


def _tokens(text: str) -> set[str]:
    return set(TOKEN.findall(text.lower()))


def _records_digest(records: list[QARecord]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(repr((r.id, r.question, r.answers, r.gold_entities, r.gold_docs, r.gold_titles, r.hops,
                       sorted(r.metadata.items()))).encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def world() -> SyntheticWorld:
    return SyntheticWorld.generate(WorldConfig(num_entities=1500, seed=7))


@pytest.fixture(scope="module")
def train(world: SyntheticWorld) -> list[QARecord]:
    return world.questions(QuestionConfig(hops=(1, 2, 3, 4), num_questions=200, split="train", seed=1))


@pytest.fixture(scope="module")
def test_split(world: SyntheticWorld) -> list[QARecord]:
    return world.questions(QuestionConfig(hops=(1, 2, 3, 4), num_questions=120, split="test", seed=1))


# -- determinism -------------------------------------------------------------------------------------------


def test_same_config_same_world_and_questions(world: SyntheticWorld, train: list[QARecord]) -> None:
    again = SyntheticWorld.generate(WorldConfig(num_entities=1500, seed=7))
    assert again.corpus.content_hash == world.corpus.content_hash
    assert [e.name for e in again.entities] == [e.name for e in world.entities]
    questions = again.questions(QuestionConfig(hops=(1, 2, 3, 4), num_questions=200, split="train", seed=1))
    assert _records_digest(questions) == _records_digest(train)


def test_other_seed_other_world(world: SyntheticWorld) -> None:
    other = SyntheticWorld.generate(WorldConfig(num_entities=1500, seed=8))
    assert other.corpus.content_hash != world.corpus.content_hash


def test_identical_across_processes_and_hash_seeds() -> None:
    # str hashing is randomised per process; output must not depend on it (or on any other global state).
    script = (
        "from searchgym.data.synthetic import *\n"
        "w = SyntheticWorld.generate(WorldConfig(num_entities=300, seed=3))\n"
        "q = w.questions(QuestionConfig(hops=(1, 2, 3), num_questions=30))\n"
        "print(w.corpus.content_hash, [r.question for r in q])\n"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    world = SyntheticWorld.generate(WorldConfig(num_entities=300, seed=3))
    assert outputs[0].startswith(world.corpus.content_hash)


# -- world and corpus --------------------------------------------------------------------------------------


def test_corpus_shape(world: SyntheticWorld) -> None:
    corpus = world.corpus
    assert len(corpus) == 1500 * 3 == world.config.num_passages
    for entity in world.entities:
        for k in range(3):
            doc = corpus.get(f"{entity.id}-{k}")
            assert doc.title == entity.name
            assert 40 <= len(doc.text.split()) <= 120, doc


def test_entity_kinds_and_types(world: SyntheticWorld) -> None:
    types = {e.type for e in world.entities}
    kinds = {e.kind for e in world.entities}
    assert types == {"person", "place", "organisation", "work"}
    assert kinds == {"person", "city", "country", "company", "university", "publisher", "studio", "label",
                     "book", "film", "album"}
    assert world.entities.by_name(world.entities[5].name) is world.entities[5]


def test_names_unique_even_as_bags_of_words(world: SyntheticWorld) -> None:
    names = [e.name for e in world.entities]
    assert len(set(names)) == len(names)
    bags = [frozenset(_tokens(n) - {"the", "of"}) for n in names]
    assert len(set(bags)) == len(bags)


def test_twins_are_confusable_but_have_their_own_facts(world: SyntheticWorld) -> None:
    twins = [e for e in world.entities if e.twin_of is not None]
    # distractor_rate 0.15 of the non-twin entities, counted within num_entities
    assert abs(len(twins) - round(1500 - 1500 / 1.15)) <= 5
    for twin in twins:
        original = world.entities.get(twin.twin_of)
        assert twin.kind == original.kind and twin.name != original.name
        a, b = twin.name.split(), original.name.split()
        # One word differs (a changed vowel, a swapped title word or given name) or only a suffix does.
        assert (len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1) or a[0] == b[0]
        for relation in ("born_in", "headquartered_in", "created_by", "published_by"):
            if world.objects(twin.id, relation):
                assert world.objects(twin.id, relation) != world.objects(original.id, relation)


def test_fact_keyword_only_in_fact_passage(world: SyntheticWorld) -> None:
    # The oracle's lexical queries rely on this: among an entity's passages only the fact's has the keyword.
    for entity in list(world.entities)[:600]:
        tokens = [_tokens(world.corpus.get(f"{entity.id}-{k}").text) for k in range(3)]
        for relation in RELATIONS:
            doc = world.fact_doc(entity.id, relation)
            if doc is None:
                continue
            keyword = relation_keyword(relation, entity.kind)
            holding = [f"{entity.id}-{k}" for k in range(3) if keyword in tokens[k]]
            assert holding == [doc], (entity, relation)


def test_for_passages() -> None:
    config = WorldConfig.for_passages(100_000)
    assert config.num_entities == 33_334 and config.num_passages >= 100_000
    small = WorldConfig.for_passages(1200, passages_per_entity=4, seed=2)
    world = SyntheticWorld.generate(small)
    assert len(world.corpus) == 1200 and small.seed == 2


# -- questions ---------------------------------------------------------------------------------------------


def test_splits_are_disjoint(world: SyntheticWorld, train: list[QARecord], test_split: list[QARecord]) -> None:
    train_starts = {r.metadata["path_ids"][0] for r in train}
    test_starts = {r.metadata["path_ids"][0] for r in test_split}
    assert train_starts and test_starts and not train_starts & test_starts
    assert all(world.split_of(s) == "train" for s in train_starts)
    assert all(world.split_of(s) == "test" for s in test_starts)
    assert {r.metadata["split"] for r in train} == {"train"}
    assert {r.metadata["split"] for r in test_split} == {"test"}
    # Other question seeds still respect the partition.
    more = world.questions(QuestionConfig(hops=2, num_questions=50, split="test", seed=9))
    assert not {r.metadata["path_ids"][0] for r in more} & train_starts


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
def test_every_hop_count(world: SyntheticWorld, hops: int) -> None:
    records = world.questions(QuestionConfig(hops=hops, num_questions=25, seed=hops))
    assert len(records) == 25
    for r in records:
        assert r.hops == hops == len(r.gold_docs) == len(r.gold_entities) == len(r.gold_titles)
        assert len(r.metadata["chain"]) == hops and r.question.endswith("?")


def test_mixed_hops_are_balanced(train: list[QARecord]) -> None:
    counts = {h: sum(r.hops == h for r in train) for h in (1, 2, 3, 4)}
    assert counts == {1: 50, 2: 50, 3: 50, 4: 50}


def test_records_are_distinct(train: list[QARecord]) -> None:
    assert len({r.id for r in train}) == len(train)
    chains = {(r.metadata["path_ids"][0], tuple(r.metadata["chain"])) for r in train}
    assert len(chains) == len(train)
    assert all(r.source == "synthetic" for r in train)


def test_gold_docs_state_each_hop(world: SyntheticWorld, train: list[QARecord], test_split: list[QARecord]) -> None:
    for r in train + test_split:
        path = r.metadata["path_ids"]
        for i, doc_id in enumerate(r.gold_docs):
            assert doc_id in world.corpus
            doc = world.corpus.get(doc_id)
            assert doc_id.startswith(path[i] + "-")
            assert doc.title == r.gold_titles[i] == world.entities.get(path[i]).name
            assert world.entities.get(path[i + 1]).name in doc.text
            assert world.fact_doc(path[i], r.metadata["chain"][i]) == doc_id


def test_gold_entities_end_with_answer(world: SyntheticWorld, train: list[QARecord]) -> None:
    for r in train:
        assert r.gold_entities[-1] == r.answers[0]
        # The start entity is named in the question and is not a gold entity.
        assert r.gold_entities == tuple(r.metadata["path_names"][1:])
        assert r.metadata["path_names"][0] in r.question
        assert r.answers[0] not in r.question
        answer = world.entities.by_name(r.answers[0])
        assert r.answers == (answer.name, *answer.aliases)


def test_answers_unique_by_recomputation(world: SyntheticWorld, train: list[QARecord],
                                         test_split: list[QARecord]) -> None:
    # Follow the relation tables from the named start: every hop must have exactly one object.
    for r in train + test_split:
        current = {world.entities.by_name(r.metadata["path_names"][0]).id}
        for relation, expected in zip(r.metadata["chain"], r.metadata["path_ids"][1:], strict=True):
            nxt = {o for e in current for o in world.objects(e, relation)}
            assert nxt == {expected}, (r.question, relation)
            current = nxt
        assert [world.entities.get(e).name for e in current] == [r.answers[0]]


def test_ambiguous_relations_are_never_asked(world: SyntheticWorld) -> None:
    two_jobs = [e for e in world.entities if len(world.objects(e.id, "employer")) == 2]
    assert two_jobs  # the world does contain ambiguous subjects...
    records = world.questions(QuestionConfig(hops=(1, 2, 3, 4), num_questions=400, seed=5))
    asked = {(r.metadata["path_ids"][i], rel) for r in records for i, rel in enumerate(r.metadata["chain"])}
    assert not {(e.id, "employer") for e in two_jobs} & asked  # ...but never asks about them


# -- oracle ------------------------------------------------------------------------------------------------


def test_oracle_trajectory_format(world: SyntheticWorld, train: list[QARecord]) -> None:
    for r in train:
        turns = world.oracle_trajectory(r)
        assert turns == oracle_trajectory(r)
        assert len(turns) == r.hops + 1
        parsed = [TURN.match(t) for t in turns]
        assert all(parsed), turns
        assert [m.group(1) for m in parsed] == ["search"] * r.hops + ["answer"]
        assert parsed[-1].group(2) == r.answers[0]
        for t in turns:
            assert t.count("<search>") + t.count("<answer>") == 1
        # Each search names the entity known at that point.
        for i, m in enumerate(parsed[:-1]):
            assert m.group(2).startswith(r.metadata["path_names"][i])


def test_oracle_queries_retrieve_gold_with_bm25(world: SyntheticWorld, train: list[QARecord]) -> None:
    bm25s = pytest.importorskip("bm25s")
    texts = [d.title + "\n" + d.text for d in world.corpus]
    ids = [d.id for d in world.corpus]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    queries, gold = [], []
    for r in train:
        for turn, doc_id in zip(world.oracle_trajectory(r)[:-1], r.gold_docs, strict=True):
            queries.append(TURN.match(turn).group(2))
            gold.append(doc_id)
    results, _ = retriever.retrieve(bm25s.tokenize(queries, stopwords="en", show_progress=False), k=3,
                                    show_progress=False)
    hits = sum(doc_id in {ids[j] for j in row} for doc_id, row in zip(gold, results, strict=True))
    assert hits / len(queries) >= 0.9, hits / len(queries)


def test_oracle_needs_synthetic_metadata() -> None:
    with pytest.raises(ConfigError):
        oracle_trajectory(QARecord("x", "Who?", ("A",)))


# -- configs -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_entities": 10},
        {"num_entities": 2000.0},
        {"num_entities": True},
        {"seed": -1},
        {"seed": "0"},
        {"distractor_rate": 0.9},
        {"distractor_rate": -0.1},
        {"passages_per_entity": 2},
        {"passages_per_entity": 7},
        {"test_fraction": 0.0},
    ],
)
def test_world_config_validation(kwargs: dict) -> None:
    with pytest.raises(ConfigError) as info:
        WorldConfig(**kwargs)
    assert next(iter(kwargs)) in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hops": 0},
        {"hops": 5},
        {"hops": (1, 5)},
        {"hops": ()},
        {"hops": "12"},
        {"hops": (1.5,)},
        {"num_questions": 0},
        {"split": "dev"},
        {"seed": -3},
    ],
)
def test_question_config_validation(kwargs: dict) -> None:
    with pytest.raises(ConfigError) as info:
        QuestionConfig(**kwargs)
    assert next(iter(kwargs)) in str(info.value)


def test_question_config_normalises_hops() -> None:
    assert QuestionConfig(hops=3).hops == (3,)
    assert QuestionConfig(hops=[3, 1, 3]).hops == (1, 3)


def test_too_many_questions_is_a_config_error() -> None:
    world = SyntheticWorld.generate(WorldConfig(num_entities=100))
    with pytest.raises(ConfigError, match="num_entities"):
        world.questions(QuestionConfig(hops=1, num_questions=5000, split="test"))


def test_unknown_relation(world: SyntheticWorld) -> None:
    with pytest.raises(ConfigError):
        world.objects(world.entities[0].id, "sibling")


def test_make_synthetic() -> None:
    corpus, records = make_synthetic(num_entities=400, seed=4, hops=(2, 3), split="test", num_questions=20)
    assert len(corpus) == 1200 and len(records) == 20
    assert {r.hops for r in records} == {2, 3}
    assert all(r.metadata["split"] == "test" for r in records)
    assert all(d in corpus for r in records for d in r.gold_docs)
