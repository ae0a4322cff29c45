"""`Action`, the `ActionProtocol` interface and protocol lookup by name."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, runtime_checkable

from searchgym.errors import ConfigError

if TYPE_CHECKING:
    from searchgym.corpus import Document

ActionKind = Literal["search", "answer", "invalid"]


class Action(NamedTuple):
    """One parsed agent turn. A named tuple (immutable) rather than a frozen dataclass: one is built at
    every step, and a frozen dataclass's `__init__` costs three times as much."""

    kind: ActionKind
    """`search`, `answer`, or `invalid` when the text holds no usable action."""
    thinking: str = ""
    """The reasoning written before the action (the contents of `<think>` blocks where present)."""
    query: str | None = None
    """The search query, for `search`."""
    answer: str | None = None
    """The final answer, for `answer`."""
    invalid_reason: str | None = None
    """For `invalid`: a short machine-readable reason (`no_action`, `empty_query`, `empty_answer`,
    `query_too_long`, `bad_tool_call`)."""


@runtime_checkable
class ActionProtocol(Protocol):
    """Parses agent text and renders prompts and observations for one action grammar."""

    name: str

    def render_prompt(self, question: str) -> str:
        """The first observation: instructions plus the question."""
        ...

    def parse(self, text: str) -> Action:
        """Turn the agent's text for one turn into an `Action`; never raises on any string."""
        ...

    def render_documents(self, documents: Sequence[Document]) -> str:
        """The observation that answers a search (`documents` is empty when nothing matched: say so)."""
        ...

    def render_invalid(self, action: Action) -> str:
        """The observation that explains an invalid action and what is expected instead."""
        ...


@lru_cache(maxsize=4096)
def format_prompt(template: str, question: str) -> str:
    """`template.format(question=question)`, cached: every episode of a question renders the same prompt,
    and formatting re-parses the whole (long) template."""
    return template.format(question=question)


def resolve_protocol(
    protocol: str | ActionProtocol, *, template: str | None = None, max_query_chars: int = 1000, doc_format: str | None = None,
    no_match_hint: bool = True,
) -> ActionProtocol:
    """An action protocol from its name (`tags`, `tool_calls`) or an instance passed through. `doc_format`
    and `no_match_hint=False` apply to the tag grammar only."""
    from searchgym.protocol.tags import TagProtocol
    from searchgym.protocol.tool_calls import ToolCallProtocol

    if doc_format is not None and protocol != "tags":
        raise ConfigError(f"doc_format applies to action_format='tags' only, not {protocol!r}")
    if not no_match_hint and protocol != "tags":
        raise ConfigError(f"no_match_hint=False applies to action_format='tags' only, not {protocol!r} (which never had the hint)")
    if not isinstance(protocol, str):
        if not isinstance(protocol, ActionProtocol):
            raise ConfigError(f"action_format must be 'tags', 'tool_calls' or an ActionProtocol, got {type(protocol).__name__}")
        return protocol
    if protocol == "tags":
        return TagProtocol(template=template, max_query_chars=max_query_chars, doc_format=doc_format,  # type: ignore[arg-type]
                           no_match_hint=no_match_hint)
    if protocol == "tool_calls":
        return ToolCallProtocol(template=template, max_query_chars=max_query_chars)
    raise ConfigError(f"unknown action_format {protocol!r}; choose 'tags' or 'tool_calls'")
