"""The client side: OpenEnv's `EnvClient` for a searchgym server, and a Gymnasium env over it.

`SearchQAClient` is OpenEnv's WebSocket client typed for searchgym (async; `.sync()` for blocking
calls). Its errors are typed: a server it cannot reach, a session the server closed and an error the
server answered with raise `EnvServerError` (with OpenEnv's error `code` when the server sent one); no
answer within `message_timeout_s` raises `EnvServerTimeout` and closes the connection, since an answer
arriving later would be read as the next call's.

`RemoteSearchQAEnv` is a `gym.Env` whose episodes run on the server: the same `reset` / `step` as
`gym.make(...)`, with the info dicts rebuilt from the typed observation, so code written for the
in-process env (the project's rollout engine, TRL's `SearchQARollout`) runs unchanged against a server.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from websockets.exceptions import ConnectionClosed

from searchgym.envs.search_qa import MAX_TEXT
from searchgym.envs.spaces import UnicodeText
from searchgym.errors import EnvServerError, EnvServerTimeout, EpisodeStateError
from searchgym.info import ResetInfo, StepInfo
from searchgym.integrations.openenv.models import SearchQAAction, SearchQAObservation, SearchQAState

logger = logging.getLogger(__name__)

START_HINT = "start one with: python -m searchgym.integrations.openenv --id SearchQA-Synthetic-v0 --port 8000"


class SearchQAClient(EnvClient[SearchQAAction, SearchQAObservation, SearchQAState]):
    """OpenEnv's client for a searchgym server: `reset(seed=..., options=...)`, `step(SearchQAAction(text=...))`
    (a plain string is taken as the action's text), `state()`.

    >>> async with SearchQAClient("http://127.0.0.1:8000") as env:  # doctest: +SKIP
    ...     result = await env.reset(seed=0)
    ...     result = await env.step("<search>capital of France</search>")
    ...     result.observation.info.labels, result.observation.info.entities
    """

    def __init__(self, base_url: str, *, connect_timeout_s: float = 10.0, message_timeout_s: float = 60.0, **kwargs: Any):
        super().__init__(base_url, connect_timeout_s=connect_timeout_s, message_timeout_s=message_timeout_s, **kwargs)

    async def connect(self) -> SearchQAClient:
        try:
            await super().connect()
        except ConnectionError as e:
            raise EnvServerError(f"cannot reach the env server at {self._ws_url}: {e.__cause__ or e}; is it running? {START_HINT}") from e
        return self

    async def step(self, action: SearchQAAction | str, **kwargs: Any) -> StepResult[SearchQAObservation]:
        return await super().step(action if isinstance(action, SearchQAAction) else SearchQAAction(text=action), **kwargs)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        kind = message.get("type")
        try:
            await self._send(message)
            response = await self._receive()
        except (TimeoutError, asyncio.TimeoutError) as e:
            await self._drop_connection()
            raise EnvServerTimeout(f"the env server sent no answer to a {kind!r} message within {self._message_timeout} s; "
                                   "the session is closed, reset to start a new one") from e
        except ConnectionClosed as e:
            # A server that refuses a session (at capacity, a failed env build) says why, then closes.
            response = await self._last_message()
            await self._drop_connection()
            if response is None or response.get("type") != "error":
                raise EnvServerError(f"the env server closed the session during a {kind!r} message ({e}); is it still running? "
                                     f"{START_HINT}") from e
        if response.get("type") == "error":
            data = response.get("data") or {}
            raise EnvServerError(f"the env server refused a {kind!r} message: {data.get('message', 'no message')}",
                                 code=str(data.get("code")) if data.get("code") is not None else None)
        return response

    async def _last_message(self) -> dict[str, Any] | None:
        """A message the server sent before it closed the connection, if one is still unread."""
        try:
            return json.loads(await asyncio.wait_for(self._ws.recv(), timeout=1.0))  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - nothing (readable) was left: the caller reports the closed session
            return None

    async def _drop_connection(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            # A server that stopped answering will not finish the closing handshake either: wait briefly.
            ws.close_timeout = 1.0
            try:
                await ws.close()
            except Exception:  # noqa: BLE001 - the connection is being abandoned; its close may fail any way
                logger.debug("closing an abandoned env-server connection failed", exc_info=True)

    def _step_payload(self, action: SearchQAAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SearchQAObservation]:
        observation = SearchQAObservation.model_validate(
            {**payload.get("observation", {}), "reward": payload.get("reward"), "done": payload.get("done", False)}
        )
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> SearchQAState:
        return SearchQAState.model_validate(payload)


@dataclass(frozen=True)
class ServedProtocol:
    """The served env's action grammar, by name (`tags` or `tool_calls`): what rollout code reads from
    `env.unwrapped.protocol` to choose its stop strings."""

    name: str


class RemoteSearchQAEnv(gym.Env[str, str]):
    """A Gymnasium env whose episodes run on a searchgym OpenEnv server (one session per env object).

    `reset` and `step` return what `gym.make(env_id, **env_kwargs)` returns in-process for the same seed,
    options and actions: the observation text, the reward, terminated and truncated, and the reset or
    step info as dicts (`searchgym.info`). An action is sent as text; bytes are decoded as the env
    decodes them, and any other value is sent as JSON null, which the env explains as `not_text` as it
    does for every non-text action. A step after the episode's end raises `EpisodeStateError` here,
    as in-process, without a round trip. `num_questions`, `max_turns` and `protocol.name` describe the
    served env; the question records (and their gold answers) stay on the server.

    >>> env = RemoteSearchQAEnv("http://127.0.0.1:8000")  # doctest: +SKIP
    >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
    """

    metadata = {"render_modes": []}

    def __init__(self, base_url: str, *, connect_timeout_s: float = 10.0, message_timeout_s: float = 60.0):
        self.base_url = base_url
        self.client = SearchQAClient(base_url, connect_timeout_s=connect_timeout_s, message_timeout_s=message_timeout_s).sync()
        try:
            state = self.client.state()
        except BaseException:
            self.client.close()
            raise
        self.env_id = state.env_id
        self.num_questions = state.num_questions
        self.max_turns = state.max_turns
        self.protocol = ServedProtocol(state.action_format)
        self.observation_space = UnicodeText(MAX_TEXT)
        self.action_space = UnicodeText(MAX_TEXT)
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, ResetInfo]:
        super().reset(seed=seed)
        result = self.client.reset(seed=seed, options=options)
        self._done = False
        return result.observation.text, result.observation.reset_info_dict()  # type: ignore[return-value]

    def step(self, action: Any) -> tuple[str, float, bool, bool, StepInfo]:
        if self._done:
            raise EpisodeStateError("the episode is over (or never started): call reset() before step()")
        if isinstance(action, bytes):
            action = action.decode("utf-8", "replace")
        result = self.client.step(SearchQAAction(text=action if isinstance(action, str) else None))
        o = result.observation
        self._done = o.terminated or o.truncated
        return o.text, float(o.reward or 0.0), o.terminated, o.truncated, o.step_info()  # type: ignore[return-value]

    def close(self) -> None:
        self.client.close()
