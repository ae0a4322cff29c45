"""GEM: searchgym made through `gem.make` (and `gem.make_vec`), equal to the plain env for the same actions."""

from __future__ import annotations

import gymnasium as gym
import pytest

gem = pytest.importorskip("gem", reason="GEM is not installed (pip install 'searchgym[gem]')")

import searchgym  # noqa: E402
from searchgym.errors import ConfigError, EpisodeStateError  # noqa: E402
from searchgym.integrations import gem as adapter  # noqa: E402
from tests.integrations.scripted import scripted_action  # noqa: E402

ID = "SearchQA-Synthetic-v0"
KW = {"num_entities": 300, "cache_dir": False}


def test_every_searchgym_id_is_registered_with_gem():
    from gem.envs.registration import ENV_REGISTRY

    assert {f"searchgym:{i}" for i in searchgym.ENV_IDS} <= set(ENV_REGISTRY)
    env = gem.make(f"searchgym:{ID}", **KW)
    assert isinstance(env, gem.Env) and env.env_id == f"searchgym:{ID}" and env.searchgym_id == ID


def test_ten_scripted_episodes_equal_the_plain_env():
    env = gem.make(f"searchgym:{ID}", **KW)
    plain = gym.make(ID, **KW)
    seen = set()
    for episode in range(10):
        assert env.reset(episode) == plain.reset(seed=episode)  # GEM passes the seed positionally
        record = plain.unwrapped.record
        for turn in range(10):
            action = scripted_action(record, turn, episode)
            got, expected = env.step(action), plain.step(action)
            assert got == expected  # observation, reward, terminated, truncated, whole info
            assert not (got[2] and got[3])  # never both, unlike GEM's own QA env
            seen.add((got[4]["action"], got[4]["labels"] is not None, got[4]["entities"] is not None))
            if got[2] or got[3]:
                assert "episode" in got[4]
                break
    assert ("search", True, True) in seen and ("answer", True, True) in seen and ("invalid", True, True) in seen


def test_constructor_seed_is_the_first_resets_and_make_vec_gives_each_env_its_own():
    plain = gym.make(ID, **KW)
    env = gem.make(f"searchgym:{ID}", seed=7, **KW)
    assert env.reset() == plain.reset(seed=7)
    assert env.reset() == plain.reset()  # later resets go on with the env's own generator
    venv = gem.make_vec([f"searchgym:{ID}"] * 3, seed=5, **KW)
    obs, infos = venv.reset()
    assert [i["question_id"] for i in infos] == [plain.reset(seed=5 + i)[1]["question_id"] for i in range(3)]
    obs, rewards, terminated, truncated, infos = venv.step(["<search>capital</search>"] * 3)
    assert [i["action"] for i in infos] == ["search"] * 3 and not terminated.any()


def test_bad_input_gets_the_envs_explanation_and_a_step_after_the_end_raises():
    env = gem.make(f"searchgym:{ID}", **KW)
    env.reset(0)
    for action in (12345, "x" * 1_000_000, "<frobnicate>q</frobnicate>"):
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["invalid_action"] and obs and reward == 0.0 and not terminated
    obs, reward, terminated, truncated, info = env.step("<answer>x</answer>")
    assert terminated and not truncated
    with pytest.raises(EpisodeStateError):
        env.step("<answer>again</answer>")


def test_misspelled_options_are_refused_not_swallowed():
    with pytest.raises(TypeError, match="num_entitis"):
        gem.make(f"searchgym:{ID}", num_entitis=300, cache_dir=False)
    with pytest.raises(ConfigError):
        adapter.SearchGymGemEnv("SearchQA-Nothing-v0")


def test_no_global_seeding(monkeypatch):
    import random

    import numpy as np

    env = gem.make(f"searchgym:{ID}", **KW)
    random.seed(123)
    np.random.seed(123)
    env.reset(0)
    assert random.random() == random.Random(123).random()
    assert np.random.random() == np.random.RandomState(123).random_sample()


def test_gems_observation_wrapper_concatenates_the_transcript():
    from gem.wrappers.observation_wrapper import ObservationWrapper

    env = ObservationWrapper(gem.make(f"searchgym:{ID}", **KW), include_action=True, include_chat_template=False)
    plain = gym.make(ID, **KW)
    prompt, _ = plain.reset(seed=3)
    env.reset(3)
    action = "<search>capital</search>"
    docs, *_ = plain.step(action)
    obs, *_ = env.step(action)
    def line(text):  # GEM's maybe_add_new_line
        return text if not text or text.endswith("\n") else text + "\n"

    assert obs == line(prompt) + line(action) + line(docs)
