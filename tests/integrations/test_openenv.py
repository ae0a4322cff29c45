"""searchgym served through OpenEnv: a real server subprocess on loopback, driven by OpenEnv's client.

The same seed and actions through the server give the same observations, rewards, labels and entities as
`gym.make(...)` in this process; bad input gets the env's explanation or OpenEnv's error, never a crashed
server; a dead or hung server makes the client raise a typed error within its timeout; and TRL's
`GRPOTrainer` trains one step on episodes played on the server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import gymnasium as gym
import pytest

pytest.importorskip("openenv", reason="the OpenEnv integration needs openenv-core (pip install 'searchgym[openenv]')")

import searchgym  # noqa: F401  (registers the ids)
from searchgym.errors import ConfigError, EnvServerError, EnvServerTimeout, EpisodeStateError
from searchgym.info import ResetInfo, StepInfo
from searchgym.integrations.openenv import (
    RemoteSearchQAEnv,
    SearchQAAction,
    SearchQAClient,
    ServeConfig,
    ServerProcess,
    make_app,
)
from searchgym.integrations.openenv.server import env_kwargs

ENV_ID = "SearchQA-Synthetic-v0"
ENV_KWARGS = {"num_entities": 300, "num_questions": 20, "hops": (1,), "max_turns": 3, "top_k": 1, "retriever": "rank_bm25", "cache_dir": False}
"""Small and fast; the same settings as the in-process TRL tests (tests/agents/integrations/test_trl.py)."""


def make_local() -> gym.Env:
    return gym.make(ENV_ID, **ENV_KWARGS)


@pytest.fixture(scope="module")
def server():
    with ServerProcess(ENV_ID, ENV_KWARGS) as process:
        yield process


def scripted_turns(env: gym.Env, episode: int) -> list[str]:
    """Search with the question's text, then: answer the gold answer (episode % 3 == 0), answer a fixed
    wrong string (1), or keep searching until the env truncates (2)."""
    record = env.unwrapped.record
    search = f"<think>I should look this up.</think><search>{record.question}</search>"
    if episode % 3 == 0:
        return [search, f"<think>The document names {record.answers[0]}.</think><answer>{record.answers[0]}</answer>"]
    if episode % 3 == 1:
        return [search, "<answer>no idea</answer>"]
    return [search] * 3


# -- 20 episodes through OpenEnv's client -------------------------------------------------------------------


def test_twenty_scripted_episodes_equal_the_in_process_env(server):
    local = make_local()
    with SearchQAClient(server.url).sync() as client:
        for episode in range(20):
            result = client.reset(seed=episode)
            obs, info = local.reset(seed=episode)
            assert result.observation.text == obs and result.observation.reset_info_dict() == info
            assert result.observation.info is None and result.reward is None and not result.done
            for turn, text in enumerate(scripted_turns(local, episode)):
                result = client.step(SearchQAAction(text=text))
                obs, reward, terminated, truncated, info = local.step(text)
                o = result.observation
                assert (o.text, result.reward, o.terminated, o.truncated, result.done) == (obs, reward, terminated, truncated, terminated or truncated)
                assert o.step_info() == info
                # The credit signals are typed fields of the observation, equal to the in-process info's.
                assert o.info.labels.model_dump() == info["labels"] and o.info.entities.model_dump() == info["entities"]
                if info["action"] == "search":
                    assert o.info.labels.retrieval_utility in (0, 1) and o.info.candidates.ids == info["candidates"]["ids"]
                    assert len(o.info.shown) == 1  # top_k=1
            # Worked out by hand: the gold answer scores 1, "no idea" 0, three searches end out of turns.
            expected = {0: ("answered", 1.0), 1: ("answered", 0.0), 2: ("out_of_turns", 0.0)}[episode % 3]
            assert (o.info.episode.outcome, result.reward) == expected
            assert o.info.episode.model_dump() == info["episode"] and o.info.episode.turns == (2 if episode % 3 < 2 else 3)
            state = client.state()
            assert state.done and state.step_count == o.info.episode.turns and state.question_id == info["question_id"]


def test_gymnasium_env_over_the_server_is_the_in_process_env(server):
    remote, local = RemoteSearchQAEnv(server.url), make_local()
    assert (remote.num_questions, remote.max_turns, remote.protocol.name) == (20, 3, "tags")
    for options in ({"index": 4}, {"question_id": local.unwrapped.records[7].id}):
        assert remote.reset(options=options) == local.reset(options=options)
        for text in scripted_turns(local, 0):
            assert remote.step(text) == local.step(text)
    remote.close()


def test_sessions_side_by_side_keep_their_own_episodes(server):
    async def play(seed: int) -> list:
        local = make_local()
        async with SearchQAClient(server.url) as client:
            got = [(await client.reset(seed=seed)).observation.text == local.reset(seed=seed)[0]]
            for text in scripted_turns(local, seed):
                await asyncio.sleep(0)  # let the other sessions' messages interleave with this one's
                result = await client.step(text)
                got.append(result.observation.step_info() == local.step(text)[4])
        return got

    async def main():
        return await asyncio.gather(*(play(seed) for seed in range(6)))

    assert all(all(episode) for episode in asyncio.run(main()))


# -- bad input ------------------------------------------------------------------------------------------------


def test_bad_input_gets_the_env_explanation_or_openenv_error(server):
    local = make_local()
    remote = RemoteSearchQAEnv(server.url)
    huge = "y" * 1_000_000
    for action in (5, None, ["a"], {"k": 1}, huge, f"<search>{huge}</search>", "<lookup>capital</lookup>", f"<answer>{huge}</answer>"):
        remote.reset(seed=3)
        local.reset(seed=3)
        sent = action if isinstance(action, str) or action is None else json.loads(json.dumps(action))
        with SearchQAClient(server.url).sync() as client:  # OpenEnv's client sends any JSON value as the action
            client.reset(seed=3)
            got = client.step(SearchQAAction(text=sent)).observation
        want = local.step(action)
        assert (got.text, got.reward, got.terminated, got.truncated, got.step_info()) == want
        local.reset(seed=3)
        assert remote.step(action) == local.step(action)
        if not isinstance(action, str):
            assert want[4]["invalid_reason"] == "not_text"
    remote.reset(seed=3)
    local.reset(seed=3)
    assert remote.step(object()) == local.step(object())  # not JSON: sent as null, explained as not_text
    local.reset(seed=3)
    assert local.step(object())[4]["invalid_reason"] == "not_text"
    # The explanations, worked out by hand.
    local.reset(seed=3)
    assert local.step(f"<search>{huge}</search>")[4]["invalid_reason"] == "query_too_long"
    local.reset(seed=3)
    assert local.step("<lookup>capital</lookup>")[4]["invalid_reason"] == "no_action"

    # A step after the end: in-process and through the Gymnasium adapter EpisodeStateError; through the
    # raw client OpenEnv's error, after which the same session plays on.
    for env in (remote, local):
        env.reset(seed=0)
        env.step("<answer>x</answer>")
        with pytest.raises(EpisodeStateError):
            env.step("<answer>x</answer>")
    with SearchQAClient(server.url).sync() as client:
        client.reset(seed=0)
        assert client.step("<answer>x</answer>").done
        with pytest.raises(EnvServerError, match=r"call reset\(\)") as caught:
            client.step("<answer>x</answer>")
        assert caught.value.code == "EXECUTION_ERROR"
        with pytest.raises(EnvServerError, match="unknown reset options") as caught:
            client.reset(options={"bogus": 1})
        assert caught.value.code == "EXECUTION_ERROR"
        with pytest.raises(EnvServerError, match="unknown reset arguments") as caught:
            client.reset(sed=1)
        assert caught.value.code == "EXECUTION_ERROR"
        assert client.reset(seed=1).observation.text == local.reset(seed=1)[0]

    async def send_no_action():  # a message that is no SearchQAAction, as another client might send it
        async with SearchQAClient(server.url) as client:
            await client.reset(seed=0)
            await client._send_and_receive({"type": "step", "data": {"txt": "x"}})

    with pytest.raises(EnvServerError) as caught:
        asyncio.run(send_no_action())
    assert caught.value.code == "VALIDATION_ERROR"
    remote.close()
    with urllib.request.urlopen(f"{server.url}/health", timeout=10) as answer:
        assert answer.status == 200 and server.process.poll() is None


# -- a dead server ------------------------------------------------------------------------------------------


def test_a_dead_or_hung_server_raises_typed_errors_in_bounded_time():
    with ServerProcess(ENV_ID, ENV_KWARGS, max_sessions=1) as dying:
        holder = SearchQAClient(dying.url, message_timeout_s=1.0).sync()
        holder.reset(seed=0)
        with SearchQAClient(dying.url).sync() as other, pytest.raises(EnvServerError) as caught:
            other.reset(seed=0)
        assert caught.value.code == "CAPACITY_REACHED"

        os.kill(dying.process.pid, signal.SIGSTOP)  # alive but answering nothing
        try:
            # Raised by the client's own 1 s timeout: what bounds the wait (OpenEnv's default is 60 s).
            with pytest.raises(EnvServerTimeout, match="no answer"):
                holder.step("<search>capital</search>")
        finally:
            os.kill(dying.process.pid, signal.SIGCONT)
        holder.close()

        # The timed-out session is dropped; once the server has let it go, a new one starts.
        # Until the server has let the old session go, a new one is refused (at capacity) or, on a busy
        # machine, closed as it opens: each try takes a fresh client.
        deadline = time.monotonic() + 30
        while True:
            client = SearchQAClient(dying.url, message_timeout_s=5.0).sync()
            try:
                client.reset(seed=0)
                break
            except EnvServerError as e:
                client.close()
                if e.code not in ("CAPACITY_REACHED", None) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        dying.process.kill()
        dying.process.wait()
        with pytest.raises(EnvServerError, match="closed the session") as caught:
            client.step("<search>capital</search>")
        assert caught.value.code is None
        with pytest.raises(EnvServerError, match="cannot reach"):
            client.reset(seed=0)
        client.close()
    with pytest.raises(EnvServerError, match="cannot reach"):
        RemoteSearchQAEnv(dying.url, connect_timeout_s=2.0)


# -- the command line and its checks --------------------------------------------------------------------------


def test_server_settings_are_checked():
    assert env_kwargs(["num_entities=300", "hops=[1, 2]", "retriever=rank_bm25", "cache_dir=false"]) == {
        "num_entities": 300, "hops": [1, 2], "retriever": "rank_bm25", "cache_dir": False}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        env_kwargs(["num_entities"])
    with pytest.raises(ConfigError, match="not loopback"):
        ServeConfig(host="0.0.0.0")
    assert ServeConfig(host="0.0.0.0", allow_remote=True).host == "0.0.0.0"
    with pytest.raises(ConfigError, match="max-sessions"):
        ServeConfig(max_sessions=0)
    with pytest.raises(ConfigError, match="unknown env id"):
        make_app("SearchQA-Nope-v0")
    with pytest.raises(ConfigError, match="bogus"):
        make_app(ENV_ID, {**ENV_KWARGS, "bogus": 1})


def test_the_command_refuses_a_bad_argument_before_serving():
    done = subprocess.run([sys.executable, "-m", "searchgym.integrations.openenv", "--env-arg", "bogus=1", "--port", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "bogus" in done.stderr


def test_the_schema_types_every_step_info_key(server):
    with urllib.request.urlopen(f"{server.url}/schema", timeout=10) as answer:
        schema = json.load(answer)
    step = schema["observation"]["$defs"]["StepInfoModel"]["properties"]
    assert set(step) == set(StepInfo.__required_keys__ | StepInfo.__optional_keys__)
    reset = schema["observation"]["$defs"]["ResetInfoModel"]["properties"]
    assert set(reset) == set(ResetInfo.__required_keys__)
    assert schema["action"]["required"] == ["text"]


def test_import_searchgym_imports_no_framework():
    code = "import searchgym, sys; bad = [m for m in ('openenv', 'trl', 'verifiers', 'fastapi') if m in sys.modules]; assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- TRL's GRPOTrainer against the live server ---------------------------------------------------------------


@pytest.mark.slow
def test_grpo_trainer_steps_on_served_episodes(server, tmp_path):
    pytest.importorskip("trl", minversion="1.0", reason="the TRL path needs TRL 1.x (pip install 'searchgym[agents,trl]')")
    import torch

    from agents.integrations.trl import SearchQARollout, TRLRolloutConfig, env_reward, format_reward, make_grpo_trainer, reward_part
    from agents.models import TinyModelConfig, build_tiny_model
    from agents.rollout import credit_metrics
    from tests.agents.integrations.test_trl import ENV_KWARGS as TRL_ENV_KWARGS
    from tests.agents.integrations.test_trl import OracleFirstSample, grpo_args

    assert TRL_ENV_KWARGS == ENV_KWARGS  # OracleFirstSample reads its oracle turns from an env made like the served one
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tokenizer = build_tiny_model(TinyModelConfig(seed=0))
        before = {n: p.detach().clone() for n, p in model.named_parameters()}

        def make_env() -> gym.Env:
            return RemoteSearchQAEnv(server.url)

        rollout = SearchQARollout(make_env, TRLRolloutConfig(max_turn_tokens=96), policy_factory=OracleFirstSample)
        trainer = make_grpo_trainer(model, tokenizer, make_env, grpo_args(tmp_path, max_steps=1), rollout=rollout, limit=8,
                                    reward_funcs=[env_reward, reward_part("f1"), format_reward])
        trainer.train()
        episodes = rollout.trajectories
        rollout.close()
    finally:
        torch.set_num_threads(threads)

    (log,) = [entry for entry in trainer.state.log_history if "rewards/env_reward/mean" in entry]
    assert len(episodes) == 4
    assert log["rewards/env_reward/mean"] == pytest.approx(sum(t.reward for t in episodes) / 4)
    # The oracle episodes answer right (reward 1, F1 1); the sampled ones do not, so the mean is 2 / 4.
    assert log["rewards/env_reward/mean"] == pytest.approx(0.5) and log["rewards/env_f1/mean"] == pytest.approx(0.5)
    # The judge's labels and the entity matches reach TRL's logs.
    for name, value in credit_metrics(episodes).items():
        assert log[name] == pytest.approx(value), name
    assert log["credit/labelled_rounds"] > 0 and log["credit/contribution"] == pytest.approx(1.0)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    # Every served episode is what the in-process env gives for the same actions.
    local = make_local()
    for t in episodes:
        local.reset(options={"question_id": t.question_id})
        replay = [local.step(text) for text in t.agent_texts[: len(t.step_infos)]]
        assert [r[4] for r in replay] == t.step_infos and sum(r[1] for r in replay) == t.reward
