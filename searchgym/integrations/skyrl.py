"""SkyRL-gym: any searchgym id as a `BaseTextEnv`, registered with SkyRL-gym as `"searchgym"`.

SkyRL's generator makes one env per trajectory, `skyrl_gym.make(env_class, env_config=..., extras=...)`,
with `env_config` from the trainer's `environment.skyrl_gym.<env_class>` settings and `extras` from the
dataset row, then calls `init(prompt)`, `step(llm_text)` until `done`, `get_metrics()` and `close()`.

- `env_config`: `id` (the searchgym id, default `SearchQA-Synthetic-v0`) and `env_kwargs` (the `gym.make`
  keyword arguments). Anything else is a `ConfigError`.
- `extras` (the row's columns besides `prompt` and `env_class`): which question, `question_id` or `index`
  (else one drawn by the env's generator), and `seed` (the reset's seed). SkyRL adds `max_turns` (its
  `generator.max_turns`): that becomes the env's `max_turns`, and an `env_kwargs` `max_turns` that differs is
  a `ConfigError` (set the two alike). SkyRL's own columns (`reward_spec`, `data_source`, `extra_info`,
  `uid`) are accepted and not read: the env scores answers itself, against its own record. Any other key is
  a `ConfigError`, so a misspelled one is not dropped.

What SkyRL receives:

- `init(prompt)` returns the prompt's system messages followed by the env's own reset prompt as a user
  message (the row's user message is replaced by it, byte for byte what `env.reset` returns), and the reset
  info as metadata.
- `step(text)` returns `observations`: the env's observation as one user message (the retrieved documents,
  or the explanation of an invalid action), none when the agent answered (the plain env's observation is
  then the empty string); `reward`: the env's reward; `done`: terminated or truncated (the two are told apart
  by `metadata["episode"]["outcome"]`); `metadata`: the env's whole step info (labels, entities, candidate
  pool ids and scores, reward parts, and the episode summary on the last step), unchanged.
- `get_metrics()`: the episode's numbers, namespaced `searchgym/...` (EM, F1, searches, invalid actions,
  format validity, gold-entity rate, labelled rounds and contributing rounds), which SkyRL averages over
  episodes (`aggregate_metrics`) and logs.

Not carried: nothing of the info is dropped, but SkyRL's built-in generator reads only observations, reward
and done; the metadata reaches custom generators and the metrics reach SkyRL's logs. A non-text action, a
1 MB one or unknown tags are the env's ordinary invalid step (an explanatory observation); `step` after
`done` raises `EpisodeStateError`, as the plain env does.

Envs are pooled per (id, kwargs) in the process (`searchgym.integrations._common`): SkyRL's env per
trajectory does not rebuild the corpus and index each time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from searchgym.errors import ConfigError, EpisodeStateError
from searchgym.integrations._common import EnvPool, episode_metrics, shared_pool

logger = logging.getLogger(__name__)

ENV_CLASS = "searchgym"
"""The name SkyRL's `env_class` (a dataset column, or `environment.env_class`) takes."""
DEFAULT_ID = "SearchQA-Synthetic-v0"

_CONFIG_KEYS = frozenset({"id", "env_kwargs"})
_EXTRA_KEYS = frozenset({"question_id", "index", "seed", "max_turns"})
_SKYRL_COLUMNS = frozenset({"reward_spec", "data_source", "extra_info", "uid"})


class SearchGymTextEnv(BaseTextEnv):
    """One searchgym episode per instance, on SkyRL-gym's `BaseTextEnv` contract (module docstring)."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        config = _plain(env_config)
        extras = _plain(extras)
        unknown = set(config) - _CONFIG_KEYS
        if unknown:
            raise ConfigError(f"unknown searchgym env_config keys {sorted(unknown)}; use 'id' and 'env_kwargs'")
        unknown = set(extras) - _EXTRA_KEYS - _SKYRL_COLUMNS
        if unknown:
            raise ConfigError(f"unknown extras {sorted(unknown)} for the searchgym env: per-sample keys are {sorted(_EXTRA_KEYS)} "
                              f"(and SkyRL's own {sorted(_SKYRL_COLUMNS)})")
        if "question_id" in extras and "index" in extras:
            raise ConfigError("extras name both 'question_id' and 'index': give one")
        env_kwargs = dict(config.get("env_kwargs") or {})
        if "max_turns" in extras:
            turns = int(extras["max_turns"])
            if env_kwargs.get("max_turns", turns) != turns:
                raise ConfigError(f"env_kwargs max_turns={env_kwargs['max_turns']} but SkyRL's generator.max_turns={turns}: set them alike")
            env_kwargs["max_turns"] = turns
        self.env_id = str(config.get("id", DEFAULT_ID))
        self._pool: EnvPool = shared_pool(self.env_id, env_kwargs)
        self._extras = extras
        self.env: Any = None
        """The pooled `gym.make` env playing this episode (from `init` until `close`)."""
        self.done = False

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        if self.env is None:
            self.env = self._pool.acquire()
        options = {k: self._extras[k] for k in ("question_id", "index") if k in self._extras}
        seed = self._extras.get("seed")
        observation, info = self.env.reset(seed=None if seed is None else int(seed), options=options or None)
        self.max_turns = self.env.unwrapped.max_turns
        self.turns, self.done = 0, False
        system = [m for m in (prompt or []) if m.get("role") == "system"]
        return [*system, {"role": "user", "content": observation}], dict(info)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self.env is None or self.done:
            raise EpisodeStateError("the searchgym episode is over (or init() was not called): call init() for a new one")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.done = bool(terminated or truncated)
        messages = [{"role": "user", "content": observation}] if observation else []
        return BaseTextEnvStepOutput(observations=messages, reward=float(reward), done=self.done, metadata=info)

    def get_metrics(self) -> dict[str, Any]:
        env = None if self.env is None else self.env.unwrapped
        if env is None or not env.turn_infos or "episode" not in env.turn_infos[-1]:
            return {}
        return episode_metrics(env.turn_infos[-1]["episode"])

    def close(self) -> None:
        if self.env is not None:
            self._pool.release(self.env)
            self.env = None


def _plain(mapping: Mapping[str, Any] | None) -> dict[str, Any]:
    """A plain dict of `mapping` (SkyRL passes OmegaConf `DictConfig`s)."""
    if mapping is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(mapping, DictConfig):
            return dict(OmegaConf.to_container(mapping, resolve=True))
    except ImportError:  # SkyRL-gym depends on omegaconf; a plain dict needs nothing
        pass
    return dict(mapping)


def register() -> None:
    """Register `"searchgym"` with SkyRL-gym's registry (done when this module is imported; safe to repeat)."""
    import skyrl_gym

    if ENV_CLASS not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_CLASS, entry_point=f"{__name__}:SearchGymTextEnv")


register()
