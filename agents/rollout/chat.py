"""Text-level episodes for chat-API policies (`OpenAIPolicy`): evaluation only, no token ids.

Each turn the conversation so far goes to the model; its reply (cut at an action's closing tag) is the
env's action, and the env's observation comes back as the next user message. Episode ends follow the
token engine's rules, except that there is no token budget (`over_long` never happens here).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym

from agents.policies.base import SamplingParams
from agents.policies.openai_chat import ChatCompletion, OpenAIPolicy
from agents.rollout.engine import DEFAULT_STOPS
from agents.rollout.trajectory import EpisodeEnd
from searchgym.backends import ChatMessage
from searchgym.errors import ConfigError
from searchgym.info import StepInfo


@dataclass
class TextEpisode:
    group: int
    sample: int
    question_id: str
    question: str | None
    gold_answers: list[str] | None
    prompt: str
    agent_texts: list[str] = field(default_factory=list)
    observation_texts: list[str] = field(default_factory=list)
    step_infos: list[StepInfo] = field(default_factory=list)
    reward: float = 0.0
    finish_reason: EpisodeEnd | None = None
    weight_version: int = 0


def restore_stop(completion: ChatCompletion, stops: Sequence[str]) -> str:
    """The reply with the stop string the API cut off put back, so the env sees a complete action.

    Uses the server's `matched_stop` when given; otherwise, for a closing tag `</x>`, puts it back when the
    reply opened `<x>` after its last `</x>`."""
    text = completion.text
    if completion.matched_stop:
        return text + completion.matched_stop
    if completion.finish_reason != "stop":
        return text
    for stop in stops:
        if stop.startswith("</") and stop.endswith(">"):
            opening = "<" + stop[2:]
            if text.rfind(opening) > text.rfind(stop):
                return text + stop
    return text


def run_chat_episodes(
    policy: OpenAIPolicy,
    make_env: Callable[[], gym.Env],
    resets: Sequence[Mapping[str, Any]],
    params: SamplingParams,
    *,
    system_prompt: str | None = None,
) -> list[TextEpisode]:
    """One episode per reset spec and per sample (`params.n`), group-major like `RolloutEngine.rollout`."""
    if not resets:
        raise ConfigError("run_chat_episodes needs at least one question")
    envs, episodes, conversations = [], [], []
    for g, spec in enumerate(resets):
        for s in range(params.n):
            env = make_env()
            options = spec.get("options") if s == 0 else {"question_id": episodes[-1].question_id}
            obs, info = env.reset(seed=spec.get("seed"), options=options)
            record = getattr(env.unwrapped, "record", None)
            envs.append(env)
            episodes.append(
                TextEpisode(g, s, str(info.get("question_id", "")), getattr(record, "question", None), list(getattr(record, "answers", ()) or ()) or None, obs)
            )
            conv: list[ChatMessage] = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
            conv.append({"role": "user", "content": obs})
            conversations.append(conv)
    protocol = getattr(envs[0].unwrapped, "protocol", None)
    stops = params.stop or DEFAULT_STOPS.get(getattr(protocol, "name", "tags"), ())
    one = replace(params, n=1, stop=tuple(stops))
    try:
        while running := [i for i, e in enumerate(episodes) if e.finish_reason is None]:
            replies = policy.complete([conversations[i] for i in running], one)
            for i, reply in zip(running, replies):
                e, text = episodes[i], restore_stop(reply[0], stops)
                obs, reward, terminated, truncated, info = envs[i].step(text)
                e.agent_texts.append(text)
                e.step_infos.append(info)
                e.reward += float(reward)
                if terminated:
                    e.finish_reason = "answered"
                elif truncated:
                    e.finish_reason = "format_error" if info.get("invalid_action") else "out_of_turns"
                else:
                    e.observation_texts.append(obs)
                    conversations[i] += [{"role": "assistant", "content": text}, {"role": "user", "content": obs}]
    finally:
        for env in envs:
            env.close()
    return episodes
