"""searchgym as a verifiers (prime-rl) environment, on verifiers 0.4's `verifiers.v1` API.

One task per question of any searchgym id (`SearchQATaskset`: the task's prompt is the env's own reset
observation); one episode per task (`SearchQAVerifiersEnv`): the model's reply goes to the env's `step` (its own
parsing, retrieval, ranking, judge and scoring), the observation comes back as the next user turn, and
the exchange ends when the env ends the episode. The task's rubric is searchgym's rewards (`env_reward`,
weight 1: the env's return; `em`, `f1`, `format`: the env's reward parts, weight 0, monitored), and its
metrics are the credit signals: the judge's labels (`credit/retrieval_utility`,
`credit/reasoning_correctness`, `credit/contribution`, `credit/labelled_rounds`, `credit/judge_failures`),
the gold-entity match rate (`credit/entity_rate`) and how the episode went (`rollout/turns`,
`rollout/searches`, `rollout/invalid_actions`, `rollout/env_ended`). The rollout state
(`trace.state`, a `SearchQAState`) holds every step's info (`searchgym.info.StepInfo`: labels, entities,
reward parts, candidates, and the episode summary on the last step) and the texts the env received; the
same step infos are in `trace.info["searchgym"]`, which verifiers writes to traces.jsonl.

The model runs in `SearchQAHarness` (this taskset's default harness): one chat completion per turn,
made in the eval process through verifiers' interception endpoint, so the trace records every call as
with any harness. verifiers' built-in `null` harness (a chat loop run as a uv-managed script) works too:
`--env.agent.harness.id null`.

    vf-eval searchgym-verifiers --env.taskset.env-id SearchQA-Synthetic-v0 -m MODEL --client.base-url URL --no-push

(`searchgym-verifiers` is the top-level module `searchgym_verifiers`, which re-exports this one:
verifiers finds tasksets by installed module name.) In Python: `load_environment(env_id, **gym_kwargs)`.

What verifiers does not carry: the observations arrive as user messages, not appended to the
assistant's own turn as searchgym's rollout engine and Search-R1 append them, so a model trained in
one format sees the other; the reply reaches the env whole (no stop strings are sent: an
OpenAI-compatible server drops a matched stop string, and the closing tag is part of the action), so
text after the action costs tokens but changes nothing; per-round credit reaches training only as
these metrics, since a trace's reward is one number per episode.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import httpx
import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.dialects.chat import message_to_wire

import searchgym
from searchgym.errors import BatchError, ConfigError
from searchgym.info import final_entity_rate, final_labels

logger = logging.getLogger(__name__)

TASKSET_ID = "searchgym-verifiers"
"""The id verifiers loads this taskset, environment and harness by (the module `searchgym_verifiers`)."""


class SearchQAData(vf.TaskData):
    """One question: the env's reset prompt (`prompt`) and what identifies the question in the env."""

    question_id: str
    question_index: int


class SearchQAState(vf.State):
    """The rollout state of one episode: what the env returned, step by step."""

    reset_info: dict[str, Any] = Field(default_factory=dict)
    """The env's reset info (`searchgym.info.ResetInfo`)."""
    actions: list[str] = Field(default_factory=list)
    """The texts the env received, one per step."""
    steps: list[dict[str, Any]] = Field(default_factory=list)
    """Every step's info (`searchgym.info.StepInfo`): labels, entities, reward parts, candidates, summary."""
    reward: float = 0.0
    """The env's return (the sum of its step rewards)."""
    env_ended: bool = False
    """Whether the env ended the episode (an answer, or out of turns) rather than verifiers (a turn or
    token limit, a failed model call)."""


class SearchQATask(vf.Task[SearchQAData, SearchQAState]):
    """A searchgym question, scored by the env's own numbers."""

    @property
    def key(self) -> str:
        return self.data.question_id

    @vf.reward
    async def env_reward(self, trace: vf.Trace) -> float:
        """The env's return: its `answer_reward` on the final answer (EM by default), 0 without an answer."""
        return trace.state.reward

    @vf.reward(weight=0.0)
    async def reward_parts(self, trace: vf.Trace) -> dict[str, float]:
        """The env's reward parts on the last step (weight 0: reported, not summed into the reward)."""
        parts = trace.state.steps[-1].get("reward", {}) if trace.state.steps else {}
        return {name: float(parts.get(name, 0.0)) for name in ("em", "f1", "format")}

    @vf.metric
    async def credit(self, trace: vf.Trace) -> dict[str, float]:
        """The episode's credit signals and shape (see the module docstring for the names)."""
        return episode_metrics(trace.state)


def episode_metrics(state: SearchQAState) -> dict[str, float]:
    """One episode's metrics: judge labels averaged over its labelled search rounds, its gold-entity match
    rate, turns, searches, invalid actions, and whether the env ended it. A mean with nothing to average
    (no labelled round, no gold entities) is left out."""
    steps = state.steps
    rounds = final_labels(steps)  # type: ignore[arg-type]
    metrics = {
        "credit/labelled_rounds": float(len(rounds)),
        "credit/judge_failures": float(sum(bool(lab.get("failed")) for lab in rounds)),
        "rollout/turns": float(len(steps)),
        "rollout/searches": float(sum(s.get("action") == "search" for s in steps)),
        "rollout/invalid_actions": float(sum(bool(s.get("invalid_action")) for s in steps)),
        "rollout/env_ended": float(state.env_ended),
    }
    for key in ("retrieval_utility", "reasoning_correctness", "contribution"):
        if rounds:
            metrics[f"credit/{key}"] = sum(float(lab[key]) for lab in rounds) / len(rounds)  # type: ignore[literal-required]
    rate = final_entity_rate(steps)  # type: ignore[arg-type]
    if rate is not None:
        metrics["credit/entity_rate"] = float(rate)
    return metrics


class SearchQATasksetConfig(vf.TasksetConfig):
    env_id: str = "SearchQA-Synthetic-v0"
    """The searchgym id (`--env.taskset.env-id`)."""
    env_args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of `gym.make(env_id, ...)`."""


def make_env(config: SearchQATasksetConfig) -> gym.Env:
    if config.env_id not in searchgym.ENV_IDS:
        raise ConfigError(f"unknown env id {config.env_id!r}; searchgym's ids are {sorted(searchgym.ENV_IDS)}")
    return gym.make(config.env_id, **config.env_args)


class SearchQATaskset(vf.Taskset[SearchQATask, SearchQATasksetConfig]):
    """One task per question of the env, in the env's order."""

    def load(self) -> Iterator[SearchQATask]:
        env = make_env(self.config)
        try:
            for index in range(len(env.unwrapped.records)):
                prompt, info = env.reset(options={"index": index})
                data = SearchQAData(prompt=prompt, name=info["question_id"], question_id=info["question_id"], question_index=index)
                yield SearchQATask(data, self.config.task)
        finally:
            env.close()


class SearchQAHarnessConfig(vf.HarnessConfig):
    request_timeout_s: float = Field(600.0, gt=0)
    """Seconds one model call may take."""


class SearchQAHarness(vf.Harness[SearchQAHarnessConfig]):
    """One chat completion per turn, made in the eval process through the rollout's interception endpoint
    (verifiers records the call in the trace, imposes the run's model and sampling, and enforces its limits)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint: str, secret: str, mcp_urls, data: vf.TaskData, **kwargs: Any) -> Any:
        from verifiers.v1.runtimes import ProgramResult

        system, prompt = self.resolve_prompt(data)
        messages = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages += [message_to_wire(m) for m in prompt or []]
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.config.request_timeout_s, connect=10.0)) as client:
            try:
                answer = await client.post(f"{endpoint.rstrip('/')}/chat/completions", headers={"Authorization": f"Bearer {secret}"},
                                           json={"model": ctx.model, "messages": messages})
            except httpx.HTTPError as e:
                return ProgramResult(exit_code=1, stdout="", stderr=f"model call failed: {type(e).__name__}: {e}")
        if answer.status_code != 200:
            return ProgramResult(exit_code=1, stdout="", stderr=f"model call answered {answer.status_code}: {answer.text[:2000]}")
        return ProgramResult(exit_code=0, stdout="", stderr="")


class SearchQAVerifiersEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The policy under evaluation or training (`--env.agent.*`). Its harness needs no sandbox: the
    subprocess runtime is the default."""


class SearchQAVerifiersEnv(vf.Env[SearchQAVerifiersEnvConfig]):
    """Plays one searchgym episode per task: the env is the agent's user."""

    def __init__(self, config: SearchQAVerifiersEnvConfig) -> None:
        super().__init__(config)
        self._idle: list[gym.Env] = []
        """Envs between episodes: building one (a corpus index, a world) costs more than an episode."""

    async def run(self, task: SearchQATask, agents: vf.Agents) -> None:
        env = self._idle.pop() if self._idle else await asyncio.to_thread(make_env, self.taskset.config)
        try:
            async with agents.agent.interaction(task) as interaction:
                await self._play(env, task, interaction)
        finally:
            self._idle.append(env)

    async def _play(self, env: gym.Env, task: SearchQATask, interaction: Any) -> None:
        state: SearchQAState = interaction.trace.state
        prompt, state.reset_info = await asyncio.to_thread(env.reset, options={"question_id": task.data.question_id})
        if prompt != task.data.prompt:
            raise BatchError(f"question {task.data.question_id!r} now resets to another prompt than its task's: "
                             "the env must be made with the settings the tasks were loaded with")
        segment = await interaction.turn()
        while not segment.terminated:
            text = reply_text(segment)
            observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, text)
            state.actions.append(text)
            state.steps.append(info)
            state.reward += float(reward)
            if terminated or truncated:
                state.env_ended = True
                interaction.trace.stop(info["episode"]["outcome"])  # answered / out_of_turns, for readers of the trace
                break
            segment = await interaction.turn(observation)
        interaction.trace.info["searchgym"] = {"reset_info": state.reset_info, "actions": state.actions, "steps": state.steps}

    async def stop(self) -> None:
        while self._idle:
            self._idle.pop().close()


def reply_text(segment: vf.Segment) -> str:
    """The model's reply as it wrote it (the last assistant message of the segment, not whitespace-stripped)."""
    for message in reversed(segment.messages):
        if isinstance(message, vf.AssistantMessage):
            return message.content if isinstance(message.content, str) else segment.last_reply
    return segment.last_reply


def load_environment(env_id: str = "SearchQA-Synthetic-v0", **env_args: Any) -> SearchQAVerifiersEnv:
    """The verifiers environment of any searchgym id: `env_args` go to `gym.make(env_id, ...)`.

    >>> env = load_environment("SearchQA-Synthetic-v0", num_entities=300, cache_dir=False)  # doctest: +SKIP
    >>> [task.data.question_id for task in env.taskset.take(2)]  # doctest: +SKIP
    """
    config = vf.resolve_env_config({"taskset": {"id": TASKSET_ID, "env_id": env_id, "env_args": env_args}})
    return vf.load_environment(config)  # type: ignore[return-value]


__all__ = [
    "SearchQAData",
    "SearchQAVerifiersEnv",
    "SearchQAVerifiersEnvConfig",
    "SearchQAHarness",
    "SearchQAHarnessConfig",
    "SearchQAState",
    "SearchQATask",
    "SearchQATaskset",
    "SearchQATasksetConfig",
    "TASKSET_ID",
    "episode_metrics",
    "load_environment",
]
