"""Hashed features and the observation vector."""

import dataclasses

import numpy as np
import pytest

from searchgym.envs import SearchQAEnv
from searchgym.errors import ConfigError
from searchgym.wrappers import (
    SLOT_FEATURES,
    DiscreteActionConfig,
    DiscreteCandidateActions,
    FeatureConfig,
    HashedFeatureObservation,
    TurnLimitAsTerminal,
    hash_words,
)


def test_hash_words_literal():
    # crc32("paris") = 2519518178: bucket 2 of 8, bit 31 set (+1); crc32("rome") = 1316141867: bucket 3, sign -1.
    vec = hash_words(["paris", "rome", "paris"], 8)
    expected = np.array([0, 0, 2, -1, 0, 0, 0, 0], dtype=np.float32) / np.sqrt(5)
    np.testing.assert_allclose(vec, expected, rtol=1e-6)
    assert vec.dtype == np.float32
    assert not hash_words([], 8).any()


def test_feature_config_validates():
    with pytest.raises(ConfigError, match="question_dim"):
        FeatureConfig(question_dim=0)


def _env(ten_doc_corpus, records, **kwargs):
    env = DiscreteCandidateActions(SearchQAEnv(records, ten_doc_corpus, cache_dir=False, **kwargs),
                                   DiscreteActionConfig(search_slots=4, answer_slots=3))
    return HashedFeatureObservation(env, FeatureConfig(question_dim=16, docs_dim=8))


def test_layout_and_slot_rows_worked_out_by_hand(ten_doc_corpus, small_records):
    env = _env(ten_doc_corpus, small_records[:1])
    f = len(SLOT_FEATURES)
    head = 16 + 8 + 5 + 4  # question, documents, turn one-hot (max_turns 4 + 1), counters
    assert env.observation_space.shape == (head + 7 * f,)
    assert len(env.slot_feature_names()) == 7 * f and env.slot_feature_names()[f] == "search1/valid"

    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs[16 + 8] == 1.0 and not obs[16:24].any()  # turn 0, no documents yet
    np.testing.assert_allclose(obs[29:33], [0.0, 0.0, 0.5, 1 / 3])  # 2 of 4 search slots, 1 of 3 answer slots
    rows = obs[head:].reshape(7, f)
    assert rows[0].tolist() == [1, 1, 0, 0] + [0] * (f - 4)  # the question slot, not yet searched
    assert rows[2:4].sum() == 0  # empty search slots

    obs, *_ = env.step(1)  # search "Italy"
    rows = obs[head:].reshape(7, f)
    assert obs[16 + 8 + 1] == 1.0 and obs[16:24].any()
    by_name = dict(zip(SLOT_FEATURES, rows[4 + 2]))  # answer slots: Rome, Italy, Roman Empire
    assert by_name["valid"] == 1 and by_name["in_question"] == 0 and by_name["cue"] == 0.25 and by_name["cue_best"] == 0
    rome = dict(zip(SLOT_FEATURES, rows[4]))
    expected = {"valid": 1, "in_question": 0, "is_title": 1, "searched": 0, "in_last": 1, "in_top_doc": 1,
                "mentions": 3 / 5, "cue": 0.75, "cue_last": 0.75, "cue_best": 1, "on_topic": 0, "age": 0, "words": 0.25}
    assert rome == pytest.approx(expected)
    # Italy is in the question, so it is never the "best cue" although its cue is as high.
    italy = dict(zip(SLOT_FEATURES, rows[5]))
    assert italy["cue_last"] == 0.75 and italy["cue_best"] == 0 and italy["searched"] == 1


def test_gold_answer_never_reaches_the_observation(ten_doc_corpus, small_records):
    record = small_records[0]
    other = dataclasses.replace(record, answers=("Seine",), gold_entities=("Paris",))
    envs = [_env(ten_doc_corpus, [r]) for r in (record, other)]
    runs = [[e.reset(seed=0)[0]] + [e.step(a)[0] for a in (1, 2)] for e in envs]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_works_without_discrete_actions(ten_doc_corpus, small_records):
    env = HashedFeatureObservation(SearchQAEnv(small_records[:1], ten_doc_corpus, cache_dir=False),
                                   FeatureConfig(question_dim=16, docs_dim=8))
    assert env.observation_space.shape == (16 + 8 + 5 + 4,) and env.slot_feature_names() == []
    env.reset(seed=0)
    obs, *_ = env.step("<search>Italy</search>")
    assert env.observation_space.contains(obs) and obs[16:24].any() and obs[16 + 8 + 1] == 1.0
    assert obs[29] == 0.25  # one search of four turns


def test_turn_limit_becomes_terminal(ten_doc_corpus, small_records):
    env = TurnLimitAsTerminal(_env(ten_doc_corpus, small_records[:1], max_turns=1))
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(3)  # an empty slot: a no-op, and the only turn
    assert (terminated, truncated, info["turn_limit"]) == (True, False, True)
    assert info["episode"]["outcome"] == "out_of_turns"
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(4)  # an answer ends the episode as before
    assert (terminated, truncated) == (True, False) and "turn_limit" not in info
