"""The synthetic world's options that give each method's mechanism room: a validation split, decoy passages
(retrieval as the bottleneck) and asides (a search round that contributes nothing). Every option is off by
default, and a world without them is byte for byte the world of before."""

from __future__ import annotations

import hashlib
import json
import re

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.data.synthetic import RELATIONS, QuestionConfig, SyntheticWorld, WorldConfig, oracle_query, relation_keyword
from searchgym.data.synthetic.filler import DECOYS
from searchgym.data.synthetic.templates import RELATION_KEYWORDS, template_for
from searchgym.errors import ConfigError

TOKEN = re.compile(r"(?u)\b\w\w+\b")


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def _digest(records) -> str:
    rows = [(r.id, r.question, r.answers, r.gold_docs, r.gold_entities, r.metadata) for r in records]
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


# Recorded from the generator before the options existed (commit 794f3f1): the corpus hash and four question
# sets (train then test; hops (1, 2, 3) then (2,); 50 questions each) of two default worlds.
BEFORE = {
    300: ("826bbe7ab9e36852a97fc40388c3c1ac65935b5ce76b1c48a638322108e28aaa",
          ["06c46db15a329058", "b48a8a68f5e0cce5", "6660f1ae47d6497a", "9e0f20923aa45b45"]),
    1000: ("9a6d16bb36fd45deac3c4c52c85830c8b0cfd87cb99f69a7591bea3315b8f75c",
           ["22d4a398bbe4725d", "b541ad337ee79020", "d91e407be2527ddc", "e35320a860a28503"]),
}


@pytest.mark.parametrize("size", sorted(BEFORE))
def test_default_worlds_and_questions_are_those_of_before_the_options(size: int) -> None:
    world = SyntheticWorld.generate(WorldConfig(num_entities=size))
    digests = [_digest(world.questions(QuestionConfig(hops=hops, num_questions=50, split=split)))
               for split in ("train", "test") for hops in ((1, 2, 3), (2,))]
    assert (world.corpus.content_hash, digests) == BEFORE[size]


def test_the_env_builds_the_default_world_by_default() -> None:
    env = gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=(2,), num_questions=50, cache_dir=False).unwrapped
    assert env.corpus.content_hash == BEFORE[300][0] and _digest(env.records) == BEFORE[300][1][1]


# -- the validation split ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def with_validation() -> SyntheticWorld:
    return SyntheticWorld.generate(WorldConfig(num_entities=1000, validation_fraction=0.1))


def test_validation_split_is_disjoint_and_leaves_the_corpus_and_test_split_alone(with_validation: SyntheticWorld) -> None:
    world = with_validation
    assert world.corpus.content_hash == BEFORE[1000][0]
    assert _digest(world.questions(QuestionConfig(hops=(2,), num_questions=50, split="test"))) == BEFORE[1000][1][3]
    starts = {split: {r.metadata["path_ids"][0] for r in world.questions(QuestionConfig(hops=(1, 2), num_questions=150, split=split))}
              for split in ("train", "test", "validation")}
    assert not starts["train"] & starts["validation"] and not starts["test"] & starts["validation"] and not starts["train"] & starts["test"]
    assert {world.split_of(e) for e in starts["validation"]} == {"validation"}
    # 10% of the 1000 entities: the next 100 of the split order after the test split's 200.
    assert sum(world.split_of(e.id) == "validation" for e in world.entities) == 100
    assert sum(world.split_of(e.id) == "test" for e in world.entities) == 200


def test_a_world_without_a_validation_split_refuses_to_draw_one() -> None:
    world = SyntheticWorld.generate(WorldConfig(num_entities=300))
    with pytest.raises(ConfigError, match="validation_fraction"):
        world.questions(QuestionConfig(split="validation", num_questions=5))


@pytest.mark.parametrize("kwargs", [{"validation_fraction": -0.1}, {"validation_fraction": 0.4}, {"decoy_rate": 1.5}])
def test_world_option_bounds(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        WorldConfig(num_entities=300, **kwargs)


def test_question_option_bounds() -> None:
    with pytest.raises(ConfigError, match="aside_rate"):
        QuestionConfig(aside_rate=2.0)
    with pytest.raises(ConfigError, match="validation"):
        QuestionConfig(split="dev")


# -- decoys ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def decoyed() -> SyntheticWorld:
    return SyntheticWorld.generate(WorldConfig(num_entities=1000, decoy_rate=1.0))


def test_decoy_sentences_hold_their_keyword_once_and_no_other() -> None:
    keywords = set(RELATION_KEYWORDS.values())
    for (relation, kind), sentences in DECOYS.items():
        own = relation_keyword(relation, "book" if kind == "*" else kind)
        for sentence in sentences:
            words = _tokens(sentence)
            assert words.count(own) == 1, sentence
            assert not (keywords - {own}) & set(words), sentence
            assert sentence.startswith(("{S}", "{Poss}")), sentence


def test_with_decoys_every_passage_holds_every_keyword_and_the_facts_stay_put(decoyed: SyntheticWorld) -> None:
    plain = SyntheticWorld.generate(WorldConfig(num_entities=1000))
    for entity in list(decoyed.entities)[:300]:
        texts = [_tokens(decoyed.corpus.get(f"{entity.id}-{k}").text) for k in range(3)]
        for relation in RELATIONS:
            doc = decoyed.fact_doc(entity.id, relation)
            assert doc == plain.fact_doc(entity.id, relation)
            if doc is None:
                continue
            keyword = relation_keyword(relation, entity.kind)
            assert all(keyword in t for t in texts), (entity.id, relation)
            # The object is named in the fact's passage only: a decoy states nothing.
            for obj in decoyed.objects(entity.id, relation):
                name = decoyed.entities.get(obj).name
                holding = [k for k in range(3) if name in decoyed.corpus.get(f"{entity.id}-{k}").text]
                assert f"{entity.id}-{holding[0]}" == doc and len(holding) == 1 or relation in ("spouse", "founded"), (entity.id, relation)


def test_decoy_rate_decoys_about_that_share_of_the_facts() -> None:
    world = SyntheticWorld.generate(WorldConfig(num_entities=1000, decoy_rate=0.5))
    facts = decoys = 0
    for entity in world.entities:
        texts = [_tokens(world.corpus.get(f"{entity.id}-{k}").text) for k in range(3)]
        for relation in RELATIONS:
            doc = world.fact_doc(entity.id, relation)
            if doc is not None:
                facts += 1
                decoys += sum(relation_keyword(relation, entity.kind) in t for t in texts) > 1
    # Drawn per fact with probability 0.5: over ~2500 facts the share is 0.5 within a few hundredths.
    assert facts > 2000 and abs(decoys / facts - 0.5) < 0.05


def test_with_decoys_the_retrievers_first_document_often_misses_the_fact_a_pool_of_five_holds(decoyed: SyntheticWorld) -> None:
    env = gym.make("SearchQA-Synthetic-v0", num_entities=1000, decoy_rate=1.0, hops=(1,), split="test", num_questions=60,
                   cache_dir=False).unwrapped
    first = pooled = 0
    for r in env.records:
        m = r.metadata
        ids = [h.doc.id for h in env.retriever.search([oracle_query(m["path_names"][0], m["chain"][0], m["path_kinds"][0])], 5)[0]]
        first += ids[0] == r.gold_docs[0]
        pooled += r.gold_docs[0] in ids
    # Every passage of the subject matches "<name> <keyword>" alike: without decoys the first is the fact's always.
    assert pooled == len(env.records) and first < 0.6 * len(env.records)


# -- asides ------------------------------------------------------------------------------------------------

def test_asides_keep_the_chains_and_prefix_another_fact_of_the_start() -> None:
    world = SyntheticWorld.generate(WorldConfig(num_entities=1000))
    plain = world.questions(QuestionConfig(hops=(2,), num_questions=60, split="test"))
    aside = world.questions(QuestionConfig(hops=(2,), num_questions=60, split="test", aside_rate=1.0))
    with_aside = 0
    for p, a in zip(plain, aside, strict=True):
        assert (p.id, p.answers, p.gold_docs, p.gold_entities, p.metadata["chain"]) == (a.id, a.answers, a.gold_docs, a.gold_entities,
                                                                                        a.metadata["chain"])
        if "aside" not in a.metadata:
            assert a.question == p.question  # a start with no fact off the chain keeps its question
            continue
        with_aside += 1
        info = a.metadata["aside"]
        assert a.question.endswith(" " + p.question) and info["name"] in a.question
        assert info["id"] not in a.metadata["path_ids"] and info["relation"] != a.metadata["chain"][0]
        assert world.objects(a.metadata["path_ids"][0], info["relation"]) == (info["id"],)
        assert not any(ans in a.question for ans in a.answers)
    assert with_aside >= 50


def test_an_aside_questions_oracle_searches_the_aside_first_for_a_round_the_gold_judge_scores_zero() -> None:
    env = gym.make("SearchQA-Synthetic-v0", num_entities=1000, hops=(2,), split="test", num_questions=20, aside_rate=1.0,
                   max_turns=4, top_k=1, cache_dir=False).unwrapped
    checked = 0
    for i, record in enumerate(env.records):
        if "aside" not in record.metadata:
            continue
        env.reset(options={"index": i})
        turns = env.world.oracle_trajectory(record)
        assert len(turns) == 4 and f"<search>{record.metadata['aside']['name']}</search>" in turns[0]
        contributions = []
        for turn in turns:
            *_, terminated, truncated, info = env.step(turn)
            if info["action"] == "search":
                contributions.append(info["labels"]["contribution"])
        assert contributions == [0, 1, 1] and info["reward"]["em"] == 1.0 and terminated
        checked += 1
    assert checked >= 15


def test_aside_rate_asides_about_that_share() -> None:
    world = SyntheticWorld.generate(WorldConfig(num_entities=1000))
    records = world.questions(QuestionConfig(hops=(1, 2), num_questions=400, split="train", aside_rate=0.5))
    share = sum("aside" in r.metadata for r in records) / len(records)
    # Drawn per question with probability 0.5 (a few starts have no fact off the chain).
    assert 0.4 < share < 0.55


def test_the_env_takes_the_options_and_the_validation_split() -> None:
    env = gym.make("SearchQA-Synthetic-v0", num_entities=1000, hops=(2,), split="validation", num_questions=10,
                   validation_fraction=0.1, decoy_rate=0.5, aside_rate=1.0, cache_dir=False).unwrapped
    assert env.world.config.decoy_rate == 0.5 and env.world.config.validation_fraction == 0.1
    assert {env.world.split_of(r.metadata["path_ids"][0]) for r in env.records} == {"validation"}
    assert template_for(DECOYS, "created_by", "film") != template_for(DECOYS, "created_by", "book")
