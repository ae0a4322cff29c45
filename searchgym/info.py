"""The step-info schema: what every `reset` and `step` returns in `info`.

This module is the one place the schema is defined; the docs page and the env docstring point here.
RL learners read these keys and nothing else: they never re-derive labels from text.

Version history:
- 1: first version.

Step info (`StepInfo`), returned by every `step`:

| key | type | meaning |
| --- | --- | --- |
| `schema_version` | int | `SCHEMA_VERSION` |
| `question_id` | str | the record's id |
| `turn` | int | 0-based index of the turn this step consumed |
| `action` | `"search"`, `"answer"`, `"invalid"` | what the agent's text parsed as |
| `invalid_action` | bool | True when `action == "invalid"` |
| `invalid_reason` | str or None | why (`no_action`, `empty_query`, `empty_answer`, `query_too_long`, `bad_tool_call`, `not_text`) |
| `thinking` | str | the reasoning written before the action |
| `query` | str or None | the search query |
| `answer` | str or None | the final answer |
| `shown` | list of `ShownDoc` | documents shown to the agent, in shown order |
| `candidates` | `Candidates` or None | the retriever's candidate pool (ids, titles, scores) for this search |
| `ranker` | dict or None | the ranker call record (inputs, raw output, parsed order, validity) for model rankers |
| `labels` | `TurnLabels` or None | judge labels for this turn (None when no judge is configured) |
| `entities` | `EntityMatches` or None | gold-entity matches up to this turn (None when the record has no gold entities) |
| `reward` | `RewardParts` | the reward and its components |
| `episode` | `EpisodeSummary` | only on the step that ends the episode |
"""

from __future__ import annotations

from typing import Literal, TypedDict

SCHEMA_VERSION = 1


class ShownDoc(TypedDict):
    id: str
    title: str
    score: float
    """The retriever's score of this document."""
    candidate_rank: int
    """Its 0-based position in the candidate pool (what the ranker moved)."""


class Candidates(TypedDict):
    ids: list[str]
    titles: list[str]
    scores: list[float]


class TurnLabels(TypedDict):
    retrieval_utility: int | None
    """u: 1 when the round's documents are relevant to the question and new; None for non-search turns."""
    reasoning_correctness: int | None
    """v: 1 when the round's reasoning is grounded in evidence seen so far and its action is useful."""
    contribution: int | None
    """p = u * v (CW-GRPO)."""
    judge: str
    """Which judge produced the labels."""
    deferred: bool
    """True when the labels are only filled in at the episode's end (slow judges, batched)."""
    failed: bool
    """True when the judge failed for this turn (labels are then 0 and counted)."""


class EntityMatches(TypedDict):
    gold: list[str]
    matched_thinking: list[str]
    """Gold entities found as whole phrases in the thinking text of this and earlier turns (E-GRPO)."""
    new_in_thinking: list[str]
    """Those first matched at this turn."""
    in_query: list[str]
    """Gold entities in this turn's query (analysis only)."""
    in_docs: list[str]
    """Gold entities in this turn's shown documents (analysis only)."""
    rate: float
    """gamma: matched_thinking / gold."""


class RewardParts(TypedDict, total=False):
    total: float
    """The reward returned by `step`."""
    answer: float
    """The configured answer reward (EM by default), on the answering step."""
    em: float
    f1: float
    cover_em: float
    format: float
    """1.0 when the whole trajectory is well formed (`searchgym.rewards.format_valid`), on the last step."""


class EpisodeSummary(TypedDict):
    outcome: Literal["answered", "out_of_turns"]
    turns: int
    searches: int
    invalid_actions: int
    em: float
    f1: float
    cover_em: float
    format_valid: bool
    turn_labels: list[TurnLabels | None]
    """Every turn's labels, in order (deferred judges fill them in here)."""
    entity_rate: float | None
    """The episode's gold-entity match rate gamma (None without gold entities)."""


class StepInfo(TypedDict):
    schema_version: int
    question_id: str
    turn: int
    action: Literal["search", "answer", "invalid"]
    invalid_action: bool
    invalid_reason: str | None
    thinking: str
    query: str | None
    answer: str | None
    shown: list[ShownDoc]
    candidates: Candidates | None
    ranker: dict | None
    labels: TurnLabels | None
    entities: EntityMatches | None
    reward: RewardParts


class ResetInfo(TypedDict):
    schema_version: int
    question_id: str
    source: str
    hops: int | None
    num_gold_entities: int
    max_turns: int
