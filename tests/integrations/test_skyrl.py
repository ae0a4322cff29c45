"""SkyRL-gym: searchgym made and stepped through `skyrl_gym.make`, equal to the plain env for the same actions."""

from __future__ import annotations

import gymnasium as gym
import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="SkyRL-gym is not installed (pip install 'searchgym[skyrl]')")

import searchgym  # noqa: E402,F401 - registers the ids
from searchgym.errors import ConfigError, EpisodeStateError  # noqa: E402
from searchgym.integrations import skyrl as adapter  # noqa: E402
from searchgym.integrations._common import episode_metrics  # noqa: E402
from tests.integrations.scripted import scripted_action  # noqa: E402

ID = "SearchQA-Synthetic-v0"
KW = {"num_entities": 300, "cache_dir": False}
SYSTEM = {"role": "system", "content": "You are a careful researcher."}


def make(extras=None, **config):
    return skyrl_gym.make("searchgym", env_config={"id": ID, "env_kwargs": KW, **config},
                          extras={"max_turns": 4, "reward_spec": {"method": "rule", "ground_truth": None}, **(extras or {})})


def test_registered_under_skyrl_gyms_own_registry():
    assert adapter.ENV_CLASS in skyrl_gym.registry
    env = make({"seed": 0})
    assert isinstance(env, adapter.SearchGymTextEnv) and isinstance(env, skyrl_gym.Env)


def test_ten_scripted_episodes_equal_the_plain_env():
    labelled = entities = 0
    for episode in range(10):
        plain = gym.make(ID, **KW)
        obs, info = plain.reset(seed=episode)
        env = make({"seed": episode, "data_source": "searchgym"})
        conversation, metadata = env.init([SYSTEM, {"role": "user", "content": "the row's prompt, replaced"}])
        assert conversation == [SYSTEM, {"role": "user", "content": obs}] and metadata == info
        record = plain.unwrapped.record
        for turn in range(10):
            action = scripted_action(record, turn, episode)
            out = env.step(action)
            obs, reward, terminated, truncated, info = plain.step(action)
            assert out["observations"] == ([{"role": "user", "content": obs}] if obs else [])
            assert out["reward"] == reward and out["done"] == (terminated or truncated)
            assert out["metadata"] == info  # labels, entities, candidates, reward parts, episode summary
            labelled += info["labels"] is not None and info["labels"]["contribution"] is not None
            entities += info["entities"] is not None
            if out["done"]:
                break
        summary = info["episode"]
        metrics = env.get_metrics()
        assert metrics == episode_metrics(summary)
        if episode == 0:  # the gold answer after one search
            assert (metrics["searchgym/em"], metrics["searchgym/answered"], metrics["searchgym/searches"]) == (1.0, 1.0, 1.0)
            assert (metrics["searchgym/invalid_actions"], metrics["searchgym/labelled_rounds"]) == (0.0, 1.0)
        if episode == 1:  # one search, then invalid actions until the turns run out (4 turns)
            assert (metrics["searchgym/answered"], metrics["searchgym/searches"], metrics["searchgym/invalid_actions"]) == (0.0, 1.0, 3.0)
        env.close()
    assert labelled >= 10 and entities >= 10  # every episode searched at least once, with labels and entities


def test_episodes_run_on_pooled_envs():
    from searchgym.integrations._common import shared_pool

    pool = shared_pool(ID, {**KW, "max_turns": 4})
    made = pool.made
    for seed in range(3):
        env = make({"seed": seed})
        env.init([])
        env.step("<answer>x</answer>")
        env.close()
    assert pool.made <= made + 1  # one after another: at most one new env, reused


def test_question_by_id_and_index():
    plain = gym.make(ID, **KW)
    records = plain.unwrapped.records
    env = make({"question_id": records[7].id})
    conversation, info = env.init([])
    assert info["question_id"] == records[7].id
    env.close()
    env = make({"index": 3})
    assert env.init([])[1]["question_id"] == records[3].id


def test_bad_input_gets_the_envs_explanation_and_a_step_after_the_end_raises():
    env = make({"seed": 1})
    env.init([])
    for action in (12345, "x" * 1_000_000, "<frobnicate>q</frobnicate>"):
        out = env.step(action)
        assert out["metadata"]["invalid_action"] and not out["done"] and out["reward"] == 0.0
        assert out["observations"][0]["role"] == "user" and out["observations"][0]["content"]
    out = env.step("<answer>x</answer>")
    assert out["done"] and out["observations"] == []
    with pytest.raises(EpisodeStateError):
        env.step("<answer>again</answer>")


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="extras"):
        make({"sede": 1})
    with pytest.raises(ConfigError, match="env_config"):
        make(ids=ID)
    with pytest.raises(ConfigError, match="max_turns"):
        skyrl_gym.make("searchgym", env_config={"id": ID, "env_kwargs": {**KW, "max_turns": 2}}, extras={"max_turns": 4})


def test_omegaconf_settings_as_skyrl_passes_them():
    from omegaconf import OmegaConf

    env = skyrl_gym.make("searchgym", env_config=OmegaConf.create({"id": ID, "env_kwargs": KW}), extras={"seed": 2})
    _, info = env.init([])
    assert info["max_turns"] == 4 and info["question_id"]
