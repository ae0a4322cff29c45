"""The action grammar: how an agent's text becomes an action and how documents become an observation.

Two grammars are provided:

- `TagProtocol` (the default): Search-R1's tags. The agent thinks in `<think>...</think>`, searches with
  `<search>query</search>`, answers with `<answer>text</answer>`; the environment answers a search with
  `<information>Doc 1(Title: "...") ...</information>`, as Search-R1's `_passages2string` writes it.
- `ToolCallProtocol`: JSON tool calls in `<tool_call>{"name": "search", "arguments": {"query": ...}}</tool_call>`,
  the form Qwen-style chat models are tuned on; results come back in `<tool_response>...</tool_response>`.

Both satisfy `ActionProtocol`; pass another implementation to the environment to change the grammar.
"""

from searchgym.protocol.base import Action, ActionKind, ActionProtocol, resolve_protocol
from searchgym.protocol.tags import SEARCH_R1_TEMPLATE, TagProtocol
from searchgym.protocol.tool_calls import ToolCallProtocol

__all__ = [
    "SEARCH_R1_TEMPLATE",
    "Action",
    "ActionKind",
    "ActionProtocol",
    "TagProtocol",
    "ToolCallProtocol",
    "resolve_protocol",
]
