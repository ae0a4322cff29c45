"""The agent of `python -m agents.experiments.compare --agent SPEC`: a Python callable, an OpenAI-compatible endpoint,
or a model, each evaluated greedily (plus k samples per question for Avg@k) on the first questions of an env.

SPEC is one of:

1. `module:callable` (e.g. `agents.experiments.examples.scripted_agent:first_title`; the module is imported from the
   current directory or PYTHONPATH; `callable` may be dotted, `module:Class.method`). What it names decides
   how it is called, once per turn, with that turn's observation text, and must return the action text
   (a `str`, e.g. `<search>query</search>` or `<answer>text</answer>` in the default grammar):
   - a function of one argument: `agent(observation) -> action`;
   - a function of two arguments, as a Gymnasium policy: `agent(observation, info) -> action`, where `info`
     is what `env.reset` or the last `env.step` returned beside the observation (`searchgym.info`: the
     shown documents' titles in `info["shown"]`, the turn, ...);
   - an object with a method `act(observation, info)` (or `act(observation)`), called the same way;
   - a class: instantiated with no arguments at the start of every episode, then called as the object it
     built (its `act` method, or the instance itself when it is callable), so it may keep state across
     the turns of one episode.
   Episodes run one after another and each episode's turns in order: the first call of an episode gets the
   prompt from `env.reset` (with the question) and the reset info, which has no `"action"` key. There is
   no token budget: only the env's `max_turns` bounds an episode.
2. `http://...` or `https://...`: an OpenAI-compatible chat endpoint (`/v1/chat/completions`; a bare
   `http://host:port` gets `/v1` appended, a trailing `/chat/completions` is dropped). Episodes are chat
   conversations (`agents.rollout.chat`): greedy (temperature 0), each reply cut at an action's closing tag
   and limited to the reference's `max_turn_tokens` (counted by the server's tokenizer); the reference's
   `max_response_tokens` is not enforced.
3. Anything else: a model name (`smollm2-135m`, a hub id when online) or a local model folder (e.g. the
   learners benchmark's `seed0/cold_start/model`), with a training checkpoint's weights on top when given
   (`agents.experiments.eval.load_policy`). It runs in this process through the same rollout engine and budgets as
   the reference learners' evaluation (`agents.train.evaluate.evaluate_policy`).

Every kind returns the learners benchmark's evaluation (`agents.train.evaluate.Evaluation`): the metrics
`eval/em`, `eval/f1`, `eval/searches`, `eval/questions` and each question's greedy EM. With `samples` = k >= 2
it also runs k sampled episodes per question and adds Avg@k (`eval/avg@k/em`, `eval/avg@k/f1`, as CW-GRPO
reports) and each question's mean EM over them: a model samples at `temperature` from the reference seed's
sampling seed, as the learners' own evaluation does; an endpoint samples at `temperature` (unseeded); a
Python agent is simply called k more times per question (a deterministic one scores its greedy EM again).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from agents.train.evaluate import Evaluation, evaluation_of
from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Act = Callable[[str, dict], str]
"""One turn of an agent: (observation, info) -> action text."""


def agent_kind(spec: str) -> str:
    """`url`, `callable` or `model` (see the module docstring)."""
    if spec.startswith(("http://", "https://")):
        return "url"
    if _CALLABLE.match(spec) and not Path(spec).exists():
        return "callable"
    return "model"


def _takes(fn: Callable, spec: str, what: str) -> int:
    """How many positional arguments to pass `fn`: 2 (observation, info) when it accepts two, else 1."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as e:
        raise ConfigError(f"--agent {spec!r}: cannot read the signature of {what} ({e})") from e
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if len(required) > 2 or (not positional and not varargs):
        raise ConfigError(f"--agent {spec!r}: {what} takes {len(required) if required else 'no'} positional arguments; an agent "
                          "is called as agent(observation) or agent(observation, info) and returns the action text")
    return 2 if len(positional) >= 2 or varargs else 1


def _bind(obj: Any, spec: str) -> Act:
    """`obj` (a function, or an object with `act`, or a callable object) as an (observation, info) -> action function."""
    act = getattr(obj, "act", None)
    if callable(act):
        fn, what = act, f"{type(obj).__name__}.act"
    elif callable(obj):
        fn, what = obj, getattr(obj, "__qualname__", type(obj).__name__)
    else:
        raise ConfigError(f"--agent {spec!r} names a {type(obj).__name__}, which is neither callable nor has an act method")
    if _takes(fn, spec, what) == 2:
        return fn
    return lambda observation, info: fn(observation)


def load_callable(spec: str) -> Callable[[], Act]:
    """For `module:callable`: a function that returns the turn function of a new episode (a fresh instance
    for a class, the same function otherwise). ConfigError when the module or the name cannot be found or
    has the wrong shape."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"--agent {spec!r}: cannot import module {module_name!r} ({e}); the module must be importable "
                          "from the current directory or PYTHONPATH, written as module:callable") from e
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in vars(obj) if not n.startswith("_")) if hasattr(obj, "__dict__") else []
            raise ConfigError(f"--agent {spec!r}: {module_name} has no attribute {attr!r} (it defines {', '.join(names) or 'nothing public'})")
        obj = getattr(obj, part)
    return episodes_of(obj, spec)


def episodes_of(obj: Any, spec: str) -> Callable[[], Act]:
    """For a Python agent object (function, object with `act`, or class): a function that returns the turn
    function of a new episode; `spec` names it in errors."""
    if isinstance(obj, type):
        cls = obj
        try:
            _bind(cls(), spec)  # the shape is checked now, not at the first question
        except TypeError as e:
            raise ConfigError(f"--agent {spec!r}: the class {cls.__name__} must be constructible with no arguments ({e})") from e
        return lambda: _bind(cls(), spec)
    bound = _bind(obj, spec)
    return lambda: bound


class CallableAgent:
    """A Python agent (`module:callable`, or the object itself from Python), run turn by turn on one env."""

    def __init__(self, agent: str | Any):
        if isinstance(agent, str):
            self.spec, self.new_episode = agent, load_callable(agent)
        else:
            self.spec = agent_name(agent)
            self.new_episode = episodes_of(agent, self.spec)

    def describe(self) -> dict[str, Any]:
        return {"agent": "callable", "spec": self.spec}

    def progress(self, questions: int, max_turns: int, rollout: Mapping[str, Any], samples: int = 0) -> tuple[int | None, str]:
        return questions * (1 + samples), "episode"

    def evaluate(self, make_env: Callable[[], gym.Env], questions: int, rollout: Mapping[str, Any], bar: Any = None, *,
                 samples: int = 0, temperature: float = 1.0, seed: int = 0) -> Evaluation:
        env = make_env()
        greedy, sampled = [], []
        try:
            for index in range(min(questions, len(env.unwrapped.records))):
                greedy.append(self._episode(env, index, bar))
            for index in range(len(greedy)):
                sampled += [self._episode(env, index, bar) for _ in range(samples)]
        finally:
            env.close()
        return evaluation_of(greedy, sampled, samples)

    def _episode(self, env: gym.Env, index: int, bar: Any) -> dict:
        """One episode of question `index`, its summary (`info["episode"]`)."""
        act = self.new_episode()
        observation, info = env.reset(options={"index": index})
        done = False
        while not done:
            action = act(observation, info)
            if not isinstance(action, str):
                raise ConfigError(f"--agent {self.spec!r} returned a {type(action).__name__} on question {index} "
                                  f"({info.get('question_id')}); an agent returns the action text, a str")
            observation, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        if bar is not None:
            bar.update(1)
        return info.get("episode", {})

    def close(self) -> None:
        pass


def chat_base_url(url: str) -> str:
    """The API root of an OpenAI-compatible endpoint: `http://h:p` -> `http://h:p/v1`;
    `.../v1/chat/completions` -> `.../v1`."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    scheme, _, rest = url.partition("://")
    return url if "/" in rest else url + "/v1"


class ChatAgent:
    """An OpenAI-compatible chat endpoint, run as text-level episodes (`agents.rollout.chat`)."""

    def __init__(self, url: str, *, model: str = "default", api_key: str | None = None, timeout_s: float = 120.0):
        from agents.policies.http import HTTPConfig
        from agents.policies.openai_chat import OpenAIPolicy, OpenAIPolicyConfig

        self.policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=chat_base_url(url), model=model,
                                                      http=HTTPConfig(timeout_s=timeout_s, api_key=api_key)))

    def describe(self) -> dict[str, Any]:
        return self.policy.describe()

    def progress(self, questions: int, max_turns: int, rollout: Mapping[str, Any], samples: int = 0) -> tuple[int | None, str]:
        return None, "it"

    def evaluate(self, make_env: Callable[[], gym.Env], questions: int, rollout: Mapping[str, Any], bar: Any = None, *,
                 samples: int = 0, temperature: float = 1.0, seed: int = 0) -> Evaluation:
        from agents.policies.base import SamplingParams
        from agents.rollout.chat import run_chat_episodes

        probe = make_env()
        n = min(questions, len(probe.unwrapped.records))
        probe.close()
        starts = [{"options": {"index": i}} for i in range(n)]

        def episodes(temperature: float, k: int) -> list[dict]:
            params = SamplingParams(temperature=temperature, max_new_tokens=int(rollout["max_turn_tokens"]), n=k,
                                    stop=tuple(rollout.get("stop") or ()))
            done = run_chat_episodes(self.policy, make_env, starts, params, system_prompt=rollout.get("system_prompt"))
            return [e.step_infos[-1].get("episode", {}) if e.step_infos else {} for e in done]

        return evaluation_of(episodes(0.0, 1), episodes(temperature, samples) if samples else [], samples)

    def close(self) -> None:
        self.policy.close()


class ModelAgent:
    """A model (name or folder, optionally a checkpoint on top) sampled in this process."""

    def __init__(self, model: str, *, checkpoint: str | None = None, seed: int = 0, dtype: str = "auto"):
        from agents.experiments.eval import load_policy

        self.model, self.checkpoint = model, checkpoint
        self.policy = load_policy(model, checkpoint, seed, dtype)

    def describe(self) -> dict[str, Any]:
        return {**self.policy.describe(), "checkpoint": self.checkpoint}

    def progress(self, questions: int, max_turns: int, rollout: Mapping[str, Any], samples: int = 0) -> tuple[int | None, str]:
        from agents.experiments.progress import evaluation_budget

        return evaluation_budget(questions, max_turns, int(rollout["max_turn_tokens"]), self.policy.config.max_batch_rows, samples), "pass"

    def evaluate(self, make_env: Callable[[], gym.Env], questions: int, rollout: Mapping[str, Any], bar: Any = None, *,
                 samples: int = 0, temperature: float = 1.0, seed: int = 0) -> Evaluation:
        from contextlib import nullcontext

        from agents.rollout import RolloutConfig
        from agents.train.evaluate import evaluate_policy
        from agents.experiments.progress import counting_passes

        stop = rollout.get("stop")
        config = RolloutConfig(**{**rollout, "stop": None if stop is None else tuple(stop)})
        with counting_passes(self.policy.sampling_model, bar) if bar is not None else nullcontext():
            return evaluate_policy(self.policy, make_env, config, questions, samples=samples, temperature=temperature, seed=seed)

    def close(self) -> None:
        pass


def agent_name(agent: Any) -> str:
    """How the table names an agent: its spec string, or a Python object's module and qualified name."""
    if isinstance(agent, str):
        return agent
    target = agent if isinstance(agent, type) or inspect.isroutine(agent) else type(agent)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__name__)}"


def resolve_agent(spec: str | Any, *, checkpoint: str | None = None, model_name: str = "default", api_key: str | None = None,
                  timeout_s: float = 120.0, seed: int = 0, dtype: str = "auto") -> CallableAgent | ChatAgent | ModelAgent:
    """The agent SPEC names (see the module docstring), or a Python agent object passed as it is (a function,
    an object with `act`, or a class, called as for `module:callable`). `checkpoint` and `dtype` (the precision
    it computes in, `agents.precision`) apply to models only; `model_name`, `api_key` and `timeout_s` to
    endpoints only."""
    kind = agent_kind(spec) if isinstance(spec, str) else "callable"
    if checkpoint is not None and kind != "model":
        raise ConfigError(f"--checkpoint loads weights on top of a model; --agent {spec!r} is a {kind}")
    if kind == "callable":
        return CallableAgent(spec)
    if kind == "url":
        return ChatAgent(spec, model=model_name, api_key=api_key, timeout_s=timeout_s)
    logger.info("loading model %s%s", spec, f" with checkpoint {checkpoint}" if checkpoint else "")
    return ModelAgent(spec, checkpoint=checkpoint, seed=seed, dtype=dtype)
