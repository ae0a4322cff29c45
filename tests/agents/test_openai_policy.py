"""OpenAIPolicy against a fake OpenAI-compatible chat endpoint, and text-level evaluation episodes."""

from __future__ import annotations

import pytest

from agents.policies import SamplingParams
from agents.policies.http import HTTPConfig
from agents.policies.openai_chat import ChatCompletion, OpenAIPolicy, OpenAIPolicyConfig
from agents.rollout.chat import restore_stop, run_chat_episodes
from searchgym.backends import ChatBackend
from searchgym.errors import BackendError, ConfigError
from tests.agents.fake_sglang import FakeSGLang

FAST = HTTPConfig(timeout_s=5.0, connect_timeout_s=1.0, retries=1, backoff_s=0.05)


def agent(messages: list[dict]) -> tuple[str, str, str | None]:
    """Searches once, then answers; reports the matched stop as SGLang does (text without it)."""
    if any(m["role"] == "user" and "<information>Doc" in m["content"] for m in messages):
        return "<think>It is the Tiber.</think><answer>Tiber", "stop", "</answer>"
    return "<think>Search first.</think><search>river Rome", "stop", "</search>"


@pytest.fixture
def fake():
    with FakeSGLang() as server:
        server.chat_script = agent
        yield server


def test_complete_sends_chat_requests(fake):
    policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=fake.url + "/v1", model="m", http=FAST))
    conv = [{"role": "user", "content": "Where?"}]
    out = policy.complete([conv, conv], SamplingParams(n=2, temperature=0.5, max_new_tokens=30, stop=("</search>",), top_k=5, seed=1))
    assert len(out) == 2 and all(len(g) == 2 for g in out)
    assert out[0][0] == ChatCompletion("<think>Search first.</think><search>river Rome", "stop", "</search>")
    body = fake.calls[-1][2]
    assert fake.calls[-1][1] == "/v1/chat/completions"
    assert body["model"] == "m" and body["n"] == 2 and body["max_tokens"] == 30 and body["stop"] == ["</search>"]
    assert body["top_k"] == 5 and body["seed"] == 1 and body["messages"] == conv
    assert isinstance(policy, ChatBackend)
    assert policy.chat([conv]) == ["<think>Search first.</think><search>river Rome"]
    with pytest.raises(ConfigError):
        policy.complete([conv], SamplingParams(stop=("a", "b", "c", "d", "e")))
    policy.close()


def test_chat_errors_are_typed(fake):
    policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=fake.url + "/v1", http=FAST))
    fake.chat_script = None  # the route disappears: 404
    with pytest.raises(BackendError, match="404"):
        policy.chat([[{"role": "user", "content": "hi"}]])
    policy.close()


@pytest.mark.parametrize(
    "completion,expected",
    [
        (ChatCompletion("<search>q", "stop", "</search>"), "<search>q</search>"),
        (ChatCompletion("<think>a</think><answer>Rome", "stop"), "<think>a</think><answer>Rome</answer>"),
        (ChatCompletion("<search>a</search> then <search>b", "stop"), "<search>a</search> then <search>b</search>"),
        (ChatCompletion("no tags at all", "stop"), "no tags at all"),
        (ChatCompletion("<answer>cut off", "length"), "<answer>cut off"),
    ],
)
def test_restore_stop(completion, expected):
    assert restore_stop(completion, ("</search>", "</answer>")) == expected


def test_chat_episodes_run_to_the_answer(fake, make_env):
    policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=fake.url + "/v1", http=FAST))
    episodes = run_chat_episodes(policy, make_env(), [{"options": {"index": 0}}, {"options": {"index": 1}}], SamplingParams(n=2, temperature=0.0))
    assert [(e.group, e.sample) for e in episodes] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    first = episodes[0]
    assert first.question_id == "q0" and first.finish_reason == "answered" and first.reward == 1.0
    assert first.agent_texts == ["<think>Search first.</think><search>river Rome</search>", "<think>It is the Tiber.</think><answer>Tiber</answer>"]
    assert [i["action"] for i in first.step_infos] == ["search", "answer"]
    assert episodes[2].question_id == "q1" and episodes[2].reward == 0.0
    # The second request carried the observation back as a user message.
    messages = [b["messages"] for _, p, b in fake.calls if p == "/v1/chat/completions"][-1]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[2]["content"] == first.observation_texts[0]
    policy.close()
