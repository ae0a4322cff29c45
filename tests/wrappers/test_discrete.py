"""`DiscreteCandidateActions` over the 10-document corpus: slots, text actions, info pass-through."""

import gymnasium as gym
import numpy as np
import pytest

from searchgym.envs import SearchQAEnv
from searchgym.errors import ConfigError, EpisodeStateError
from searchgym.wrappers import DiscreteActionConfig, DiscreteCandidateActions

QUESTION = "Which river flows through the capital of Italy?"


@pytest.fixture
def make_env(ten_doc_corpus, small_records):
    def make(**kwargs):
        return SearchQAEnv(small_records[:1], ten_doc_corpus, cache_dir=False, **kwargs)

    return make


def test_slots_of_a_hand_built_episode(make_env):
    env = DiscreteCandidateActions(make_env(), DiscreteActionConfig(search_slots=4, answer_slots=3))
    assert env.action_space == gym.spaces.Discrete(7)
    _, info = env.reset(seed=0)
    offered = {"search": [QUESTION, "Italy", None, None], "answer": ["Italy", None, None]}
    assert info["discrete"]["candidates"] == offered
    assert env.action_masks().tolist() == [True, True, False, False, True, False, False]

    _, reward, terminated, _, info = env.step(1)
    assert info["action"] == "search" and info["query"] == "Italy"
    assert [d["id"] for d in info["shown"]] == ["d1", "d7"]
    text = "<think>Searching for Italy.</think>\n<search>Italy</search>"
    assert info["discrete"] == {"slot": 1, "kind": "search", "phrase": "Italy", "text": text, "candidates": offered}
    # Four search phrases (Italy, Rome, Roman Empire, Tiber) for three phrase slots: the last is dropped.
    assert env.slot_phrases() == {
        "search": [QUESTION, "Italy", "Rome", "Roman Empire"],
        "answer": ["Rome", "Italy", "Roman Empire"],
    }

    _, reward, terminated, _, info = env.step(4)
    assert (info["action"], info["answer"], reward, terminated) == ("answer", "Rome", 0.0, True)


def test_answering_the_gold_slot_scores(make_env):
    env = DiscreteCandidateActions(make_env())
    env.reset(seed=0)
    env.step(1)
    tiber = env.slot_for("<answer>the Tiber</answer>")
    assert tiber == env.config.search_slots + 3
    _, reward, terminated, _, info = env.step(tiber)
    assert reward == 1.0 and terminated and info["episode"]["em"] == 1.0


def test_slot_for_matches_oracle_style_queries(make_env):
    env = DiscreteCandidateActions(make_env())
    env.reset(seed=0)
    assert env.slot_for("<think>x</think><search>Italy capital</search>") == 1  # the phrase inside the query
    assert env.slot_for(f"<search>{QUESTION}</search>") == 0
    assert env.slot_for("<search>Danube</search>") is None
    assert env.slot_for("<answer>Danube</answer>") is None
    assert env.slot_for("no action at all") is None


def test_empty_slot_is_a_noop_invalid_turn(make_env):
    env = DiscreteCandidateActions(make_env(max_turns=2))
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(5)
    assert info["discrete"]["kind"] == "noop" and info["discrete"]["phrase"] is None
    assert info["invalid_action"] and info["invalid_reason"] == "no_action"
    assert "invalid" in obs and (reward, terminated, truncated) == (0.0, False, False)
    *_, truncated, info = env.step(5)
    assert truncated and info["episode"]["invalid_actions"] == 2


def test_info_passes_through_unchanged(make_env):
    """Same text actions on a bare env give the same info, key for key, apart from `discrete`."""
    wrapped, bare = DiscreteCandidateActions(make_env()), make_env()
    _, w_info = wrapped.reset(seed=0)
    _, b_info = bare.reset(seed=0)
    assert {k: v for k, v in w_info.items() if k != "discrete"} == b_info
    for slot in (1, 2, wrapped.config.search_slots + 3):
        w_obs, w_r, w_term, w_trunc, w_info = wrapped.step(slot)
        b_obs, b_r, b_term, b_trunc, b_info = bare.step(w_info["discrete"]["text"])
        assert (w_obs, w_r, w_term, w_trunc) == (b_obs, b_r, b_term, b_trunc)
        assert {k: v for k, v in w_info.items() if k != "discrete"} == b_info
        assert set(b_info) >= {"labels", "entities", "reward", "shown", "candidates"}
    assert w_info["episode"] == b_info["episode"]


def test_tool_call_grammar(make_env):
    env = DiscreteCandidateActions(make_env(action_format="tool_calls"), DiscreteActionConfig(think=False))
    env.reset(seed=0)
    _, _, _, _, info = env.step(1)
    assert info["discrete"]["text"] == '<tool_call>{"name": "search", "arguments": {"query": "Italy"}}</tool_call>'
    assert (info["action"], info["query"], info["thinking"]) == ("search", "Italy", "")


def test_bad_actions_and_configs_raise_typed_errors(make_env):
    env = DiscreteCandidateActions(make_env())
    with pytest.raises(EpisodeStateError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    for bad in (-1, env.config.size, 1.5, "1", True):
        with pytest.raises(ConfigError, match="integer slot"):
            env.step(bad)
    assert env.step(np.int64(1))[4]["discrete"]["slot"] == 1
    with pytest.raises(ConfigError, match="search_slots"):
        DiscreteActionConfig(search_slots=0)
    with pytest.raises(ConfigError, match="answer_slots"):
        DiscreteActionConfig(answer_slots=0)
    with pytest.raises(ConfigError, match="not a searchgym"):
        DiscreteCandidateActions(gym.make("CartPole-v1"))


def test_without_a_corpus_phrases_come_from_the_observation(ten_doc_corpus, small_records):
    from searchgym.retrieval import BM25Retriever

    env = DiscreteCandidateActions(SearchQAEnv(small_records[:1], None, retriever=BM25Retriever(ten_doc_corpus)))
    assert env.unwrapped.corpus is None
    env.reset(seed=0)
    env.step(1)
    assert [p for p in env.slot_phrases()["answer"] if p] == ["Rome", "Tiber", "Italy", "Roman Empire"]
