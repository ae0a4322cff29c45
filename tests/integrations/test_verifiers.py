"""searchgym in verifiers: episodes through verifiers' own evaluation path (`run_eval`, what `vf-eval`
runs in-process) against an OpenAI-compatible endpoint on loopback, served by a scripted agent or by the
tiny test model. The same replies through the in-process env give the same rewards and step infos."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler

import gymnasium as gym
import pytest

pytest.importorskip("verifiers.v1", reason="the verifiers integration needs verifiers 0.4 (pip install 'searchgym[verifiers]')")

from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig

import searchgym  # noqa: F401  (registers the ids)
from searchgym.errors import ConfigError
from searchgym.integrations.verifiers import TASKSET_ID, SearchQAState, SearchQAVerifiersEnv, episode_metrics, load_environment
from tests.helpers import LoopbackServer, send_reply

ENV_ID = "SearchQA-Synthetic-v0"
ENV_KWARGS = {"num_entities": 300, "num_questions": 20, "hops": [1], "max_turns": 3, "top_k": 1, "retriever": "rank_bm25", "cache_dir": False}


def make_local() -> gym.Env:
    return gym.make(ENV_ID, **ENV_KWARGS)


class ChatServer:
    """A loopback `/v1/chat/completions` endpoint whose replies come from `reply(messages, body) -> str`."""

    def __init__(self):
        self.reply = lambda messages, body: ""
        self.requests: list[dict] = []
        self.status = 200
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self.path != "/v1/chat/completions" or server.status != 200:
                    return send_reply(self, server.status if self.path == "/v1/chat/completions" else 404, {"error": "scripted"})
                text = server.reply(body["messages"], body)
                send_reply(self, 200, {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
                                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        self.loopback = LoopbackServer(Handler, "/v1")
        self.url = self.loopback.url


@pytest.fixture
def chat():
    server = ChatServer()
    yield server
    server.loopback.close()


def evaluate(chat: ChatServer, tmp_path, limit: int, **sampling) -> list:
    config = EvalConfig.model_validate({
        "env": {"taskset": {"id": TASKSET_ID, "env_id": ENV_ID, "env_args": ENV_KWARGS}},
        "model": "test-model", "client": {"base_url": chat.url, "api_key_var": "SEARCHGYM_TEST_NO_KEY"}, "sampling": sampling,
        "push": False, "rich": None, "output_dir": str(tmp_path), "select": {"limit": limit},
    })
    episodes = asyncio.run(run_eval(config))
    return [trace for episode in episodes for trace in episode.traces]


def question_of(messages: list[dict]) -> str:
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    return prompt.rsplit("Question: ", 1)[1].strip()


def scripted(records):
    """Search with the question's text, then: the gold answer (question index % 3 == 0), a fixed wrong
    answer (1), or more searches until the env truncates (2)."""
    by_question = {r.question: (i, r) for i, r in enumerate(records)}

    def reply(messages, body):
        index, record = by_question[question_of(messages)]
        if not any(m["role"] == "assistant" for m in messages) or index % 3 == 2:
            return f"<think>I should look this up.</think><search>{record.question}</search>"
        return f"<think>The document names it.</think><answer>{record.answers[0]}</answer>" if index % 3 == 0 else "<answer>no idea</answer>"

    return reply


def replay(trace) -> tuple[list, float]:
    """The trace's actions through the in-process env: the step infos and the return."""
    local = make_local()
    state: SearchQAState = trace.state
    local.reset(options={"question_id": trace.task.data.question_id})
    results = [local.step(text) for text in state.actions]
    return [r[4] for r in results], sum(r[1] for r in results)


def test_ten_scripted_episodes_through_the_eval_path(chat, tmp_path):
    records = make_local().unwrapped.records
    chat.reply = scripted(records)
    traces = evaluate(chat, tmp_path, limit=10)
    assert len(traces) == 10 and all(t.ok for t in traces)
    for trace in traces:
        index, state = trace.task.data.question_index, trace.state
        steps, env_return = replay(trace)
        assert state.steps == steps and trace.rewards["env_reward"].score == env_return == state.reward
        # Worked out by hand: the gold answer scores 1; "no idea" 0; three searches end out of turns with 0.
        expected = [(1.0, "answered", 2), (0.0, "answered", 2), (0.0, "out_of_turns", 3)][index % 3]
        assert (trace.reward, trace.stop_condition, len(steps)) == expected
        assert state.env_ended and steps[-1]["episode"]["outcome"] == expected[1]
        # Labels and entity matches are in the rollout state, and their summaries in the metrics.
        searches = [s for s in steps if s["action"] == "search"]
        assert all(s["labels"]["contribution"] in (0, 1) and s["entities"]["gold"] for s in searches)
        assert trace.metrics == episode_metrics(state) and trace.metrics["credit/labelled_rounds"] == len(searches)
        assert trace.metrics["rollout/turns"] == len(steps) and trace.rewards["f1"].weight == 0.0
        # One model call per env step, each recorded on the trace.
        assert len(trace.calls) == len(steps) and all(c.error is None for c in trace.calls)
    written = [json.loads(line) for line in next(tmp_path.rglob("traces.jsonl")).read_text().splitlines()]
    assert len(written) == 10 and all(w["traces"][0]["info"]["searchgym"]["steps"] for w in written)  # one line per episode


def test_replies_the_env_cannot_act_on_get_its_explanation(chat, tmp_path):
    huge = "y" * 1_000_000
    turns = ["", "<lookup>the capital</lookup>", huge]
    chat.reply = lambda messages, body: turns[sum(m["role"] == "assistant" for m in messages)]
    traces = evaluate(chat, tmp_path, limit=2)
    for trace in traces:
        assert trace.ok and trace.stop_condition == "out_of_turns" and trace.reward == 0.0
        steps, _ = replay(trace)
        assert trace.state.steps == steps and trace.state.actions == turns
        assert [s["invalid_reason"] for s in steps] == ["no_action"] * 3


def test_a_failing_or_dead_model_endpoint_is_a_typed_error_on_the_trace(chat, tmp_path):
    # verifiers' own error type (its ProviderError, stop condition provider_error) lands on the trace;
    # the env never steps and the eval goes on.
    chat.status = 500
    (trace,) = evaluate(chat, tmp_path / "500", limit=1)
    assert not trace.ok and trace.stop_condition == "provider_error" and trace.state.steps == []
    assert trace.errors[-1].type == "ProviderError" and "500" in trace.errors[-1].message
    chat.loopback.close()  # nothing listens any more: connection refused, at once
    (trace,) = evaluate(chat, tmp_path / "dead", limit=1)
    assert not trace.ok and trace.stop_condition == "provider_error" and trace.errors[-1].type == "ProviderError"


@pytest.mark.slow
def test_tiny_model_episodes_through_the_eval_path(chat, tmp_path):
    pytest.importorskip("torch", reason="the tiny model needs torch (pip install 'searchgym[agents]')")
    from agents.models import TinyModelConfig, build_tiny_model
    from agents.policies.base import SamplingParams
    from agents.policies.hf import HFPolicy, HFPolicyConfig

    model, tokenizer = build_tiny_model(TinyModelConfig(seed=0))
    policy = HFPolicy(model, tokenizer, config=HFPolicyConfig(seed=0))
    lock = threading.Lock()

    def reply(messages, body):
        ids = tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False), add_special_tokens=False)
        params = SamplingParams(max_new_tokens=int(body.get("max_tokens") or 32), temperature=float(body.get("temperature", 1.0)),
                                stop=("</search>", "</answer>"), seed=len(ids))
        with lock:
            return policy.generate([ids], params)[0][0].text

    chat.reply = reply
    traces = evaluate(chat, tmp_path, limit=3, max_tokens=24, temperature=1.0)
    assert len(traces) == 3 and all(t.ok for t in traces)
    assert all(body["max_tokens"] == 24 and body["model"] == "test-model" for body in chat.requests)
    for trace in traces:
        steps, env_return = replay(trace)
        assert trace.state.steps == steps and trace.rewards["env_reward"].score == env_return
        assert trace.state.env_ended and len(trace.calls) == len(steps) >= 1


def test_load_environment_builds_the_env_over_any_id():
    env = load_environment(ENV_ID, **ENV_KWARGS)
    assert isinstance(env, SearchQAVerifiersEnv)
    tasks = list(env.taskset)
    local = make_local()
    assert len(tasks) == 20
    for i in (0, 7):
        prompt, info = local.reset(options={"index": i})
        assert tasks[i].data.prompt == prompt and tasks[i].key == info["question_id"] == tasks[i].data.question_id
    with pytest.raises(ConfigError, match="unknown env id"):
        list(load_environment("SearchQA-Nope-v0").taskset)


def test_import_searchgym_imports_no_framework():
    code = "import searchgym, sys; bad = [m for m in ('verifiers', 'openenv', 'trl') if m in sys.modules]; assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
