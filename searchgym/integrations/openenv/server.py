"""The server side: a searchgym env as an OpenEnv `Environment`, served by OpenEnv's own app factory.

`make_app("SearchQA-Synthetic-v0", {"num_entities": 300})` is OpenEnv's `create_app` over
`SearchQAEnvironment`: every WebSocket session (`/ws`, what `SearchQAClient` speaks) gets its own
`gym.make(env_id, **env_kwargs)` env, built when the session opens and closed when it ends, and stepped
in the session's own thread, so sessions run side by side up to `max_sessions`.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

import searchgym
from searchgym.cli.keyvalues import key_values
from searchgym.errors import ConfigError
from searchgym.integrations.openenv.models import (
    ResetInfoModel,
    SearchQAAction,
    SearchQAObservation,
    SearchQAState,
    StepInfoModel,
)
from searchgym.retrieval.server import is_loopback

logger = logging.getLogger(__name__)


class SearchQAEnvironment(Environment[SearchQAAction, SearchQAObservation, SearchQAState]):
    """One session's searchgym env behind OpenEnv's `reset` / `step` / `state`.

    `reset(seed=None, episode_id=None, options=None)` is `env.reset(seed=seed, options=options)` (options
    as in-process: `{"index": i}` or `{"question_id": id}`); `step(SearchQAAction(text=...))` is
    `env.step(text)`. Errors the env raises (a step after the end: `EpisodeStateError`; unknown reset
    options: `ConfigError`; a failed retriever) leave the session open and reach the client as OpenEnv's
    error message (`SearchQAClient` raises `EnvServerError` with its code).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True
    """Each session owns its env: nothing mutable is shared between sessions."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any] | None = None):
        super().__init__()
        self.env_id = env_id
        self.env = gym.make(env_id, **dict(env_kwargs or {}))
        core = self.env.unwrapped
        protocol = getattr(core, "protocol", None)
        self._state = SearchQAState(
            env_id=env_id,
            num_questions=len(getattr(core, "records", ())),
            max_turns=int(getattr(core, "max_turns", 0)),
            action_format=getattr(protocol, "name", "tags"),
        )

    def reset(self, seed: int | None = None, episode_id: str | None = None, options: dict[str, Any] | None = None,
              **kwargs: Any) -> SearchQAObservation:
        if kwargs:  # OpenEnv hands over every key of the client's reset message; a misspelled one is an error here
            raise ConfigError(f"unknown reset arguments {sorted(kwargs)}; reset takes seed, episode_id and options")
        obs, info = self.env.reset(seed=seed, options=options)
        self._state.episode_id = episode_id or uuid.uuid4().hex
        self._state.step_count = 0
        self._state.question_id = info["question_id"]
        self._state.done = False
        return SearchQAObservation(text=obs, reset_info=ResetInfoModel.model_validate(info))

    def step(self, action: SearchQAAction, timeout_s: float | None = None, **kwargs: Any) -> SearchQAObservation:
        obs, reward, terminated, truncated, info = self.env.step(action.text)
        self._state.step_count += 1
        self._state.done = terminated or truncated
        return SearchQAObservation(text=obs, reward=float(reward), done=terminated or truncated, terminated=terminated,
                                   truncated=truncated, info=StepInfoModel.model_validate(info))

    @property
    def state(self) -> SearchQAState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=f"searchgym/{self.env_id}",
            description=("A searchgym question-answering environment: the agent searches a corpus over several turns and "
                         "answers; every step carries judge labels, gold-entity matches and reward parts."),
            version=searchgym.__version__,
        )

    def close(self) -> None:
        self.env.close()


def make_app(env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, max_sessions: int = 64):
    """OpenEnv's FastAPI app (`create_app`) serving `gym.make(env_id, **env_kwargs)`, one env per
    WebSocket session, at most `max_sessions` at once. The env is built once here to check the id and
    the arguments, so a typo fails at start, not at the first session."""
    if max_sessions < 1:
        raise ConfigError(f"max_sessions must be >= 1, got {max_sessions}")
    if env_id not in searchgym.ENV_IDS:
        raise ConfigError(f"unknown env id {env_id!r}; searchgym's ids are {sorted(searchgym.ENV_IDS)}")
    kwargs = dict(env_kwargs or {})
    try:
        SearchQAEnvironment(env_id, kwargs).close()
    except TypeError as e:  # gym.make passes the arguments to the env's constructor, which names the one it does not take
        raise ConfigError(f"gym.make({env_id!r}, ...) refused the arguments {sorted(kwargs)}: {e}") from e
    factory = functools.partial(SearchQAEnvironment, env_id, kwargs)
    return create_app(factory, SearchQAAction, SearchQAObservation, env_name=env_id, max_concurrent_envs=max_sessions)


@dataclass(frozen=True)
class ServeConfig:
    """What `python -m searchgym.integrations.openenv` serves, and where."""

    env_id: str = "SearchQA-Synthetic-v0"
    """The gym id every session's env is made from (`--id`)."""
    env_args: tuple[str, ...] = ()
    """`gym.make` keyword arguments as KEY=VALUE, the value read as JSON when it parses (`--env-arg num_entities=300`)."""
    host: str = "127.0.0.1"
    """Interface to bind; loopback by default. Any other address needs `allow_remote`: the server then
    answers every machine that can reach it, and OpenEnv's server has no authentication."""
    allow_remote: bool = False
    """Allow a `host` that is not loopback."""
    port: int = 8000
    """TCP port."""
    max_sessions: int = 64
    """WebSocket sessions (each with its own env) open at once; one more is refused with OpenEnv's `CAPACITY_REACHED`."""

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.allow_remote:
            raise ConfigError(f"--host {self.host} is not loopback: the server would answer every machine that can reach it, "
                              "without authentication; pass --allow-remote if that is what you want")
        if not 0 <= self.port < 65536:
            raise ConfigError(f"--port must be in 0..65535, got {self.port}")
        if self.max_sessions < 1:
            raise ConfigError(f"--max-sessions must be >= 1, got {self.max_sessions}")
        env_kwargs(self.env_args)

    def env_kwargs(self) -> dict[str, Any]:
        return env_kwargs(self.env_args)


def env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """`gym.make` keyword arguments from KEY=VALUE strings; a value that parses as JSON is read as JSON
    (`300`, `[1, 2]`, `false`), any other is a string.

    >>> env_kwargs(["num_entities=300", "hops=[1]", "retriever=rank_bm25"])
    {'num_entities': 300, 'hops': [1], 'retriever': 'rank_bm25'}
    """
    return key_values(pairs, "--env-arg")


def serve(config: ServeConfig, *, log_level: str = "info") -> None:
    """Build the app (checking the env id and arguments) and serve it with uvicorn until interrupted."""
    import uvicorn

    app = make_app(config.env_id, config.env_kwargs(), max_sessions=config.max_sessions)
    logger.info("serving %s on ws://%s:%d/ws (OpenEnv), at most %d sessions", config.env_id, config.host, config.port,
                config.max_sessions)
    uvicorn.run(app, host=config.host, port=config.port, log_level=log_level)
