import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.corpus import Document
from searchgym.errors import ConfigError
from searchgym.protocol import SEARCH_R1_TEMPLATE, Action, TagProtocol, ToolCallProtocol, resolve_protocol
from searchgym.protocol.tags import extract_thinking


@pytest.fixture
def tags():
    return TagProtocol()


def test_prompt_is_search_r1(tags):
    prompt = tags.render_prompt("Who wrote Hamlet?")
    assert prompt == SEARCH_R1_TEMPLATE.format(question="Who wrote Hamlet?")
    assert prompt.endswith("Question: Who wrote Hamlet?\n")


def test_parsed_actions_are_whole_actions(tags):
    # The search and answer actions are built field by field (no keyword handling): they must equal the
    # named tuple built the usual way, every field included.
    assert tags.parse("<think>a</think><search>q</search>") == Action("search", thinking="a", query="q")
    assert tags.parse("<think>a</think><answer>x</answer>") == Action("answer", thinking="a", answer="x")
    assert len(tags.parse("<search>q</search>")) == len(Action._fields)


def test_search_with_thinking(tags):
    a = tags.parse("<think>I need the author.</think>\n<search> Hamlet author </search> trailing")
    assert (a.kind, a.query, a.thinking) == ("search", "Hamlet author", "I need the author.")


def test_first_complete_action_wins(tags):
    a = tags.parse("<answer>early</answer><search>late</search>")
    assert (a.kind, a.answer) == ("answer", "early")
    # An unclosed search before a complete answer: the answer is the first complete action.
    a = tags.parse("<search>never closed <answer>Paris</answer>")
    assert (a.kind, a.answer) == ("answer", "Paris")


def test_nested_search_takes_inner(tags):
    a = tags.parse("<search><search>inner query</search>")
    assert (a.kind, a.query) == ("search", "inner query")


def test_thinking_without_think_tags(tags):
    a = tags.parse("I should look it up. <search>q</search>")
    assert a.thinking == "I should look it up."


@pytest.mark.parametrize(
    "text, reason",
    [
        ("no tags at all", "no_action"),
        ("<search>   </search>", "empty_query"),
        ("<answer></answer>", "empty_answer"),
        ("<search>" + "x" * 1001 + "</search>", "query_too_long"),
    ],
)
def test_invalid_reasons(tags, text, reason):
    a = tags.parse(text)
    assert (a.kind, a.invalid_reason) == ("invalid", reason)
    assert "<search>" in tags.render_invalid(a)


def test_render_documents_search_r1_format(tags):
    obs = tags.render_documents([Document("1", "Paris", "Capital of France."), Document("2", "Rome", "Capital of Italy.")])
    assert obs == "\n\n<information>Doc 1(Title: Paris) Capital of France.\nDoc 2(Title: Rome) Capital of Italy.</information>\n\n"


def test_tool_calls_roundtrip():
    p = ToolCallProtocol()
    call = json.dumps({"name": "search", "arguments": {"query": "Hamlet author"}})
    a = p.parse(f"<think>hmm</think><tool_call>{call}</tool_call>")
    assert (a.kind, a.query, a.thinking) == ("search", "Hamlet author", "hmm")
    a = p.parse('<tool_call>{"name": "answer", "arguments": {"answer": 1603}}</tool_call>')
    assert (a.kind, a.answer) == ("answer", "1603")
    for bad in ["<tool_call>{not json}</tool_call>", '<tool_call>["search"]</tool_call>', '<tool_call>{"name": "browse", "arguments": {}}</tool_call>']:
        assert p.parse(bad).invalid_reason == "bad_tool_call"
    assert json.loads(p.render_documents([Document("1", "T", "x")]).strip()[len("<tool_response>") : -len("</tool_response>")]) == [{"rank": 1, "title": "T", "text": "x"}]


def test_resolve_protocol():
    assert isinstance(resolve_protocol("tags"), TagProtocol)
    assert resolve_protocol("tags", template="Q: {question}").render_prompt("x") == "Q: x"
    with pytest.raises(ConfigError):
        resolve_protocol("xml")


_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
_TAG = re.compile(r"</?(?:think|search|answer|information)>")


def _regex_thinking(prefix: str) -> str:
    """The definition `extract_thinking` implements with `str.find`."""
    blocks = [m.group(1).strip() for m in _THINK.finditer(prefix)]
    if blocks:
        return "\n".join(b for b in blocks if b)
    return _TAG.sub(" ", prefix).strip()


@pytest.mark.parametrize(
    "prefix, expected",
    [
        ("<think>a</think> <think> b </think>", "a\nb"),
        ("<think>unclosed\n", "unclosed"),
        ("<think></think><think>x", "x"),
        ("<think>", ""),
        ("plain <search> text", "plain   text"),
        ("</think>x<think>y</think>", "y"),
    ],
)
def test_extract_thinking_cases(prefix, expected):
    assert extract_thinking(prefix) == expected == _regex_thinking(prefix)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["<think>", "</think>", "<search>", "</answer>", "<information>", " ", "\n", "a", "b c", "<", ">"]), max_size=12).map("".join))
def test_extract_thinking_matches_regex_definition(prefix):
    assert extract_thinking(prefix) == _regex_thinking(prefix)
