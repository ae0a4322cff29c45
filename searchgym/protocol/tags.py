"""Search-R1's tag grammar: `<think>`, `<search>`, `<information>`, `<answer>`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, get_args

from searchgym.errors import ConfigError
from searchgym.protocol.base import Action, format_prompt

if TYPE_CHECKING:
    from searchgym.corpus import Document

SEARCH_R1_TEMPLATE = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)
"""Search-R1's instruction prompt, kept word for word (typo included) so that checkpoints trained on it
see the prompt they expect."""

DocFormat = Literal["search-r1", "plain"]
"""How a search's documents are written inside `<information>`:

- `search-r1`: Search-R1's `_passages2string` over each document's wiki-18 `contents` (`"Title"\\ntext`):
  `Doc 1(Title: "Paris") text`, the title line as the corpus has it, quotes included. What a policy
  trained with Search-R1 saw.
- `plain`: `Doc 1(Title: Paris) text`, the title without quotes (searchgym's text before `search-r1` became
  the default of Search-R1's template).
"""
DOC_FORMATS: tuple[str, ...] = get_args(DocFormat)


def search_r1_passages(documents: Sequence[Document]) -> str:
    """Search-R1's `_passages2string` (search_r1/llm_agent/generation.py), byte for byte, over each
    document's `contents` as a Search-R1 retrieval server sends it.

    Search-R1 takes the first line of `contents` as the title and the rest (inner newlines kept) as the
    text, writes `Doc {i}(Title: {title}) {text}` plus a newline per document, and its caller strips the
    whole before wrapping it in `<information>`.
    """
    parts = []
    for i, doc in enumerate(documents, 1):
        # partition gives what split("\n")[0] and "\n".join(split("\n")[1:]) give, in one pass.
        title, _, text = doc.contents.partition("\n")
        parts.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(parts)


_new_action = tuple.__new__
"""`_new_action(Action, (kind, thinking, query, answer, invalid_reason))` is `Action(...)` without the
named tuple's generated `__new__` and its keyword handling: a third of the cost, for the two actions
built at nearly every step."""

NO_MATCH_HINT = ("No document matches this query. Search again with other words, e.g. names or phrases "
                 "from the question.")
"""The observation text for a search that found nothing (the retriever matched none of the query's words)."""

_ANY_TAG = re.compile(r"</?(?:think|search|answer|information)>")


def first_complete_tag(text: str, names: Sequence[str]) -> tuple[str, int, int, int] | None:
    """The earliest-opening complete `<name>...</name>` pair among `names`.

    Returns (name, start of the opening tag, start of the content, end of the content) or None. Runs in
    linear time: only the first opening tag of each name can start the earliest complete pair, since any
    later opening of the same name has no closing tag after it if the first has none.
    """
    best = None
    for name in names:
        tags = _TAGS.get(name)
        if tags is None:
            tags = _TAGS[name] = (f"<{name}>", f"</{name}>")
        start = text.find(tags[0])
        if start < 0 or (best is not None and start > best[1]):
            continue
        end = text.find(tags[1], start + len(tags[0]))
        if end >= 0:
            best = (name, start, start + len(tags[0]), end)
    return best


_TAGS: dict[str, tuple[str, str]] = {}
"""Opening and closing tag of each name asked about (built once: this runs at every step)."""


def extract_thinking(prefix: str) -> str:
    """The reasoning in `prefix`: the joined `<think>` blocks, or the bare text when there are none.

    A block runs from `<think>` to the next `</think>` or the end of the text: the blocks the regex
    `<think>(.*?)(?:</think>|$)` (DOTALL) finds, located with `str.find` because this runs on every step
    and the regex scan costs a few times more.
    """
    start = prefix.find("<think>")
    if start < 0:
        return _strip_tags(prefix)
    blocks = []
    while start >= 0:
        start += 7
        end = prefix.find("</think>", start)
        if end < 0:
            blocks.append(prefix[start:].strip())
            break
        blocks.append(prefix[start:end].strip())
        start = prefix.find("<think>", end + 8)
    return blocks[0] if len(blocks) == 1 else "\n".join([b for b in blocks if b])


def _strip_tags(text: str) -> str:
    """`text` with every grammar tag replaced by a space, stripped."""
    return (_ANY_TAG.sub(" ", text) if "<" in text else text).strip()


_ACTIONS = ("search", "answer")


class TagProtocol:
    """Search-R1 tags. The first complete `<search>` or `<answer>` pair is the action; text after it is
    ignored, as Search-R1 stops generation at the closing tag.

    `doc_format` (see `DocFormat`) defaults to `"search-r1"` with Search-R1's own template (the default)
    and to `"plain"` with a template of your own. `no_match_hint=False` answers a search that matched
    nothing with an empty `<information></information>`, as searchgym did before 2026-12-04.
    """

    name = "tags"

    def __init__(self, *, template: str | None = None, max_query_chars: int = 1000, doc_format: DocFormat | None = None,
                 no_match_hint: bool = True):
        if doc_format is not None and doc_format not in DOC_FORMATS:
            raise ConfigError(f"doc_format must be one of {list(DOC_FORMATS)} or None, got {doc_format!r}")
        self.template = SEARCH_R1_TEMPLATE if template is None else template
        self.max_query_chars = max_query_chars
        self.doc_format: DocFormat = doc_format or ("search-r1" if template is None else "plain")
        self.no_match_hint = bool(no_match_hint)

    def render_prompt(self, question: str) -> str:
        return format_prompt(self.template, question)

    def parse(self, text: str) -> Action:
        found = first_complete_tag(text, _ACTIONS)
        if found is None:
            return Action("invalid", thinking=extract_thinking(text), invalid_reason="no_action")
        name, tag_start, content_start, content_end = found
        thinking = extract_thinking(text[:tag_start])
        content = text[content_start:content_end]
        # A nested opening tag (`<search><search>q</search>`) means the inner one is what was meant.
        inner = content.rfind(_TAGS[name][0])
        if inner >= 0:
            content = content[inner + len(name) + 2 :]
        content = _strip_tags(content)
        if name == "search":
            if not content:
                return Action("invalid", thinking=thinking, invalid_reason="empty_query")
            if len(content) > self.max_query_chars:
                return Action("invalid", thinking=thinking, invalid_reason="query_too_long")
            return _new_action(Action, ("search", thinking, content, None, None))
        if not content:
            return Action("invalid", thinking=thinking, invalid_reason="empty_answer")
        return _new_action(Action, ("answer", thinking, None, content, None))

    def render_documents(self, documents: Sequence[Document]) -> str:
        if not documents:
            # An empty <information></information> reads like a broken tool to a model and to a person
            # (Search-R1's dense retriever always returns k documents, so its format has no empty case).
            return "\n\n<information>" + (NO_MATCH_HINT if self.no_match_hint else "") + "</information>\n\n"
        if self.doc_format == "search-r1":
            # As Search-R1's execute_predictions wraps a search's results.
            return f"\n\n<information>{search_r1_passages(documents).strip()}</information>\n\n"
        lines = [f"Doc {i}(Title: {doc.title}) {doc.text}" for i, doc in enumerate(documents, 1)]
        return "\n\n<information>" + "\n".join(lines) + "</information>\n\n"

    def render_invalid(self, action: Action) -> str:
        why = {
            "no_action": "no complete <search>...</search> or <answer>...</answer> was found",
            "empty_query": "the search query was empty",
            "empty_answer": "the answer was empty",
            "query_too_long": f"the search query was longer than {self.max_query_chars} characters",
        }.get(action.invalid_reason or "", action.invalid_reason or "the action could not be read")
        return (
            f"\nMy previous action is invalid: {why}. If I want to search, I should put the query between "
            "<search> and </search>. If I want to give the final answer, I should put the answer between "
            "<answer> and </answer>. Let me try again.\n"
        )
