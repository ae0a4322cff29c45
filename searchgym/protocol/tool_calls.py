"""JSON tool calls: `<tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from searchgym.protocol.base import Action, format_prompt
from searchgym.protocol.tags import extract_thinking, first_complete_tag

if TYPE_CHECKING:
    from searchgym.corpus import Document

TOOL_CALL_TEMPLATE = (
    "Answer the given question using the tools below. Think step by step inside <think> and </think>. "
    "Call exactly one tool per turn, written as JSON inside <tool_call></tool_call>:\n"
    '- search: {{"name": "search", "arguments": {{"query": "<search terms>"}}}} returns documents inside '
    "<tool_response></tool_response>.\n"
    '- answer: {{"name": "answer", "arguments": {{"answer": "<short answer>"}}}} ends the task.\n'
    "Question: {question}\n"
)


class ToolCallProtocol:
    """JSON tool calls in `<tool_call>` tags; `search` and `answer` are the two tools."""

    name = "tool_calls"

    def __init__(self, *, template: str | None = None, max_query_chars: int = 1000):
        self.template = TOOL_CALL_TEMPLATE if template is None else template
        self.max_query_chars = max_query_chars

    def render_prompt(self, question: str) -> str:
        return format_prompt(self.template, question)

    def parse(self, text: str) -> Action:
        found = first_complete_tag(text, ("tool_call",))
        if found is None:
            return Action("invalid", thinking=extract_thinking(text), invalid_reason="no_action")
        _, tag_start, content_start, content_end = found
        thinking = extract_thinking(text[:tag_start])
        try:
            call = json.loads(text[content_start:content_end])
        except (ValueError, RecursionError):  # ValueError also covers integers of over 4300 digits
            return Action("invalid", thinking=thinking, invalid_reason="bad_tool_call")
        args = call.get("arguments") if isinstance(call, dict) else None
        if not isinstance(args, dict):
            return Action("invalid", thinking=thinking, invalid_reason="bad_tool_call")
        if call.get("name") == "search":
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                return Action("invalid", thinking=thinking, invalid_reason="empty_query")
            if len(query) > self.max_query_chars:
                return Action("invalid", thinking=thinking, invalid_reason="query_too_long")
            return Action("search", thinking=thinking, query=query.strip())
        if call.get("name") == "answer":
            answer = args.get("answer")
            if not isinstance(answer, (str, int, float)) or not str(answer).strip():
                return Action("invalid", thinking=thinking, invalid_reason="empty_answer")
            return Action("answer", thinking=thinking, answer=str(answer).strip())
        return Action("invalid", thinking=thinking, invalid_reason="bad_tool_call")

    def render_documents(self, documents: Sequence[Document]) -> str:
        results = [{"rank": i, "title": doc.title, "text": doc.text} for i, doc in enumerate(documents, 1)]
        return "\n<tool_response>" + json.dumps(results, ensure_ascii=False) + "</tool_response>\n"

    def render_invalid(self, action: Action) -> str:
        return (
            f"\n<tool_response>Invalid tool call ({action.invalid_reason}). Call exactly one tool as JSON inside "
            '<tool_call></tool_call>: {"name": "search", "arguments": {"query": "..."}} or '
            '{"name": "answer", "arguments": {"answer": "..."}}.</tool_response>\n'
        )
