import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.corpus import Document
from searchgym.errors import ConfigError
from searchgym.protocol import SEARCH_R1_TEMPLATE, Action, TagProtocol, ToolCallProtocol, resolve_protocol
from searchgym.protocol.tags import NO_MATCH_HINT, extract_thinking, search_r1_passages


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


def passages2string(retrieval_result: list[dict]) -> str:
    """Search-R1's `_passages2string` (search_r1/llm_agent/generation.py), transcribed statement for statement."""
    format_reference = ""
    for idx, doc_item in enumerate(retrieval_result):
        content = doc_item["document"]["contents"]
        title = content.split("\n")[0]
        text = "\n".join(content.split("\n")[1:])
        format_reference += f"Doc {idx+1}(Title: {title}) {text}\n"
    return format_reference


def search_r1_observation(contents: list[str]) -> str:
    # Search-R1's execute_predictions: f'\n\n<information>{search_results.pop(0).strip()}</information>\n\n'
    result = passages2string([{"document": {"id": str(i), "contents": c}} for i, c in enumerate(contents)])
    return f"\n\n<information>{result.strip()}</information>\n\n"


def test_render_documents_search_r1_format(tags):
    docs = [Document("1", "Paris", "Capital of France."), Document("2", "Rome", "Capital of Italy.")]
    obs = tags.render_documents(docs)
    assert obs == '\n\n<information>Doc 1(Title: "Paris") Capital of France.\nDoc 2(Title: "Rome") Capital of Italy.</information>\n\n'
    assert tags.doc_format == "search-r1"
    plain = TagProtocol(doc_format="plain").render_documents(docs)
    assert plain == "\n\n<information>Doc 1(Title: Paris) Capital of France.\nDoc 2(Title: Rome) Capital of Italy.</information>\n\n"
    # A template of your own keeps the plain text unless asked.
    assert TagProtocol(template="Q: {question}").doc_format == "plain"
    with pytest.raises(ConfigError, match="doc_format"):
        TagProtocol(doc_format="Search-R1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "docs",
    [
        [Document("0", "Evan Morris", "Evan Morris Evan L. Morris (January 26, 1977 \u2013 July 9, 2015) was a lobbyist.")],
        # Inner newlines, an empty title, quotes inside the title, unicode, trailing spaces in the last text.
        [Document("a", "Two\nLines?", "first\nsecond"), Document("b", "", "no title"), Document("c", 'The "Boss"', "Café  ")],
    ],
)
def test_search_r1_format_is_passages2string_byte_for_byte(tags, docs):
    expected = search_r1_observation([d.contents for d in docs])
    assert tags.render_documents(docs).encode("utf-8") == expected.encode("utf-8")
    assert search_r1_passages(docs) == passages2string([{"document": {"contents": d.contents}} for d in docs])


def test_no_documents_give_a_hint_in_every_format(tags):
    """Search-R1's dense retriever always returns k documents, so its format has no empty case to copy; a
    BM25 search can match nothing, and an empty <information></information> reads like a broken tool."""
    assert search_r1_passages([]) == passages2string([])
    for protocol in (tags, TagProtocol(doc_format="plain")):
        assert protocol.render_documents([]) == "\n\n<information>" + NO_MATCH_HINT + "</information>\n\n"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=20), st.text(max_size=40)), min_size=1, max_size=5))
def test_search_r1_format_matches_for_any_text(pairs):
    docs = [Document(str(i), title, text) for i, (title, text) in enumerate(pairs)]
    assert TagProtocol().render_documents(docs) == search_r1_observation([d.contents for d in docs])


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


def _contents_lines(path) -> list[str]:
    return [json.loads(line)["contents"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_search_r1_format_over_a_wiki18_file_matches_the_raw_contents(tmp_path):
    # wiki-18 as FlashRAG and Search-R1 ship it: each line {"id", "contents": "\"Title\"\ntext"}.
    from searchgym.corpus import load_corpus

    rows = [
        {"id": "0", "contents": '"Evan Morris"\nEvan Morris Evan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist.'},
        {"id": "1", "contents": '"Horatio Hale"\nconsisted of an Algonkin vocabulary, which he gathered from a band.'},
        {"id": "2", "contents": '"Dibba Al-Hisn"\nis believed to be the site where the Portuguese built a fort.'},
        # About one passage in eight of FlashRAG's wiki-18 copy has a bare title line; Search-R1 shows it bare.
        {"id": "3", "contents": 'Absalon\ncity of ""Havn"" (English: Harbour), and built there a castle.'},
    ]
    path = tmp_path / "wiki18.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    docs = list(load_corpus(path))
    assert TagProtocol().render_documents(docs) == search_r1_observation(_contents_lines(path))
    assert TagProtocol().render_documents(docs).startswith('\n\n<information>Doc 1(Title: "Evan Morris") Evan Morris Evan L.')
    assert TagProtocol().render_documents(docs[3:]) == '\n\n<information>Doc 1(Title: Absalon) city of ""Havn"" (English: Harbour), and built there a castle.</information>\n\n'
    assert [d.contents for d in docs] == [r["contents"] for r in rows]


@pytest.mark.shared_data
def test_search_r1_format_over_the_real_wiki18_sample():
    from searchgym.corpus import load_corpus
    from tests.helpers import shared_file

    path = shared_file("wiki_corpus/wiki18_sample_1000.jsonl")
    docs = list(load_corpus(path))
    contents = _contents_lines(path)
    for start in range(0, len(docs), 3):
        assert TagProtocol().render_documents(docs[start : start + 3]) == search_r1_observation(contents[start : start + 3])
