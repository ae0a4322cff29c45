"""The typed OpenEnv action, observation and state of a searchgym env, and the step-info models they carry.

The step info's pydantic models (`StepInfoModel`, `ResetInfoModel` and the models nested in them) are
built from `searchgym.info`'s TypedDicts, key for key, so the two cannot drift apart: the schema stays
defined in one place. `to_info` turns a model back into the dict the in-process env returns, keys the
TypedDict marks optional left out where the env leaves them out (`episode` before the last step, the
answer metrics of `reward` before the answer).
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, JsonValue, create_model

from searchgym.info import ResetInfo, StepInfo

_MODELS: dict[type, type[BaseModel]] = {}
_OPTIONAL: dict[type[BaseModel], frozenset[str]] = {}
"""Per generated model: the keys its TypedDict does not require (left out of `to_info` when None)."""


def model_of(typed_dict: type) -> type[BaseModel]:
    """The pydantic model of a `searchgym.info` TypedDict: the same keys and value types, nested
    TypedDicts as models; keys the TypedDict does not require default to None. Unknown keys are refused."""
    if typed_dict in _MODELS:
        return _MODELS[typed_dict]
    hints = typing.get_type_hints(typed_dict)
    required = typed_dict.__required_keys__  # type: ignore[attr-defined]
    fields: dict[str, Any] = {}
    for key, kind in hints.items():
        kind = _model_type(kind)
        fields[key] = (kind, ...) if key in required else (kind | None, None)
    model = create_model(f"{typed_dict.__name__}Model", __config__=ConfigDict(extra="forbid"), **fields)
    model.__doc__ = typed_dict.__doc__
    _MODELS[typed_dict] = model
    _OPTIONAL[model] = frozenset(hints) - required
    return model


def _model_type(kind: Any) -> Any:
    """`kind` with every TypedDict inside it replaced by its model."""
    if typing.is_typeddict(kind):
        return model_of(kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (Union, types.UnionType):
        converted = tuple(_model_type(a) for a in args)
        return Union[converted]  # noqa: UP007 - built from a tuple of types
    if origin is list:
        return list[_model_type(args[0])]
    if origin is dict:
        return dict[args[0], _model_type(args[1])]
    return kind


def to_info(value: Any) -> Any:
    """A generated model (or a list or dict holding them) as plain dicts, keyed as the env keys its info."""
    if isinstance(value, BaseModel):
        optional = _OPTIONAL.get(type(value), frozenset())
        return {k: to_info(v) for k, v in value if not (v is None and k in optional)}
    if isinstance(value, list):
        return [to_info(v) for v in value]
    if isinstance(value, dict):
        return {k: to_info(v) for k, v in value.items()}
    return value


StepInfoModel = model_of(StepInfo)
"""A step's info (`searchgym.info.StepInfo`) as a pydantic model: `labels`, `entities`, `reward` (the
reward parts), `candidates`, `shown`, `ranker` and, on the last step, `episode` are typed fields."""
ResetInfoModel = model_of(ResetInfo)
"""A reset's info (`searchgym.info.ResetInfo`) as a pydantic model."""


class SearchQAAction(Action):
    """One agent turn: the text the policy wrote. The env parses the first action in it (`<search>q</search>`
    or `<answer>a</answer>` with the default grammar); anything else is an ordinary invalid turn with an
    explanatory observation, including a value that is not text (the env's `not_text`)."""

    text: JsonValue = Field(description="The agent's turn. Any JSON value is accepted; the env explains why a non-string is no action.")


class SearchQAObservation(Observation):
    """What the env returned: the observation text, `reward`, `done` (terminated or truncated), and the
    step info as typed fields. After `reset`, `reset_info` is set and `info` is None; after a `step`, the
    other way round."""

    text: str = Field("", description="The observation: the prompt after reset, the shown documents after a search, "
                                       "an explanation after an invalid action, empty after the answer.")
    terminated: bool = Field(False, description="The agent answered.")
    truncated: bool = Field(False, description="The episode ran out of turns (never both).")
    info: StepInfoModel | None = Field(None, description="The step info (searchgym.info.StepInfo): labels, entities, "  # type: ignore[valid-type]
                                                          "reward parts, candidates, episode summary on the last step.")
    reset_info: ResetInfoModel | None = Field(None, description="The reset info (searchgym.info.ResetInfo).")  # type: ignore[valid-type]

    def step_info(self) -> dict[str, Any]:
        """The step info as the in-process env returns it (`searchgym.info.StepInfo`)."""
        if self.info is None:
            raise ValueError("this observation came from reset(): read reset_info")
        return to_info(self.info)

    def reset_info_dict(self) -> dict[str, Any]:
        """The reset info as the in-process env returns it (`searchgym.info.ResetInfo`)."""
        if self.reset_info is None:
            raise ValueError("this observation came from step(): read info")
        return to_info(self.reset_info)


class SearchQAState(State):
    """The session's env: which id it is, its questions, and where the current episode stands
    (`episode_id` and `step_count` are OpenEnv's)."""

    env_id: str = Field("", description="The gym id the server was started with.")
    num_questions: int = Field(0, description="How many questions the env holds (reset options={'index': i} picks one).")
    max_turns: int = Field(0, description="Turns before truncation.")
    action_format: str = Field("tags", description="The env's action grammar (tags or tool_calls).")
    question_id: str | None = Field(None, description="The current episode's question.")
    done: bool = Field(True, description="No episode is running (before the first reset, or after the last step).")
