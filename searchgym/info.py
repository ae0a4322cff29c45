"""The step-info schema: what every `reset` and `step` returns in `info`.

This module is the one place the schema is defined; the docs page and the env docstring point here.
RL learners read these keys and nothing else: they never re-derive labels from text.

Version history:
- 1 (2026-12-02): first version. Refined before release, without changing any key's meaning:
  `TurnLabels` gained `pending`, `analysis` and `error`; `EpisodeSummary` gained `judge_failures`.
- 2 (2026-12-03): `Candidates` holds `ids` and `scores` only (its `titles` went: nothing read them, and
  they cost ~3% of a BM25 step). A candidate's title is `env.corpus.get(id).title`; shown documents keep
  theirs.
- 3 (2026-12-04): `RewardParts` and `EpisodeSummary` gained `subem` (Search-R1's and FlashRAG's substring
  exact match, `searchgym.rewards.substring_exact_match`) beside `cover_em`; `labels_reason` in the reset
  and step info says why a turn carries no judge labels. Envs label by default (`judge="auto"`:
  `GoldJudge` wherever the record has gold supporting documents or titles).

An env emits an earlier schema's keys exactly when made with `info_schema=` that schema (`SCHEMA_VERSIONS`):
`info_schema=2` drops `subem` and `labels_reason`, `info_schema=1` also puts `titles` back in `candidates`
(`as_reset_schema`, `as_step_schema`, `candidates_v1`). Values are today's; only the keys are the old ones.

Judge labels (`TurnLabels`)
---------------------------
Search turns get u (retrieval utility), v (reasoning correctness) and p = u * v (CW-GRPO's contribution),
each 0 or 1. Answer and invalid turns get a `TurnLabels` whose three values are None (CW-GRPO weighs search
rounds only). Without a judge `labels` is None and `labels_reason` says why (the env was made with
`judge=None`, or the default `judge="auto"` found no gold supporting documents or titles in the record)
and how to plug in a judge. A *synchronous* judge (`deferred=False`, e.g. `GoldJudge`)
fills the labels at the step they describe. A *deferred* judge (`deferred=True`, e.g. `LLMJudge` by
default) labels every search round of the episode in one batch when the episode ends: the step infos then
carry placeholders (`pending=True`, values None) and the filled labels are in
`info["episode"]["turn_labels"]` (which holds every turn's final labels in both modes, so a learner that
reads labels there works with either kind of judge). A judge failure (timeout,
backend error, malformed output, an exception) never raises out of `step`: the turn gets u = v = p = 0,
`failed=True` and an `error` kind, and `episode["judge_failures"]` counts it.

Entity matches (`EntityMatches`)
--------------------------------
Present whenever the record has gold entities (and the env's `match_entities` is on). Matching is
`searchgym.entities`: whole phrases after normalization (case, accents, punctuation, articles,
whitespace). gamma (`rate`) counts the thinking text only, cumulatively over the episode.

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
| `candidates` | `Candidates` or None | the retriever's candidate pool (ids and scores, retriever order) for this search |
| `ranker` | `RankerCallRecord` or None | the ranker call record (inputs, raw output, parsed order, validity) for model rankers |
| `labels` | `TurnLabels` or None | judge labels for this turn (None when no judge is configured; see above) |
| `labels_reason` | str or None | why `labels` is None (no judge, or no gold evidence for the default one); None when labelled |
| `entities` | `EntityMatches` or None | gold-entity matches up to this turn (None when the record has no gold entities or matching is off) |
| `reward` | `RewardParts` | the reward and its components |
| `episode` | `EpisodeSummary` | only on the step that ends the episode |
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, TypedDict

from searchgym.protocol.base import ActionKind

if TYPE_CHECKING:
    from searchgym.retrieval.base import Hit

SCHEMA_VERSION = 3
SCHEMA_VERSIONS: tuple[int, ...] = (1, 2, 3)
"""The schemas an env can emit (its `info_schema` argument): this one, and each earlier one key for key."""


class ShownDoc(TypedDict):
    id: str
    title: str
    score: float
    """The retriever's score of this document."""
    candidate_rank: int
    """Its 0-based position in the candidate pool (what the ranker moved)."""


class Candidates(TypedDict):
    ids: list[str]
    scores: list[float]


class TurnLabels(TypedDict):
    retrieval_utility: int | None
    """u: 1 when the round's documents are relevant to the question and new; None for non-search turns
    and for pending (deferred) labels."""
    reasoning_correctness: int | None
    """v: 1 when the round's reasoning is grounded in evidence seen so far and its action is useful."""
    contribution: int | None
    """p = u * v (CW-GRPO)."""
    judge: str
    """Which judge produced the labels (`Judge.name`, e.g. `gold`, `llm`)."""
    deferred: bool
    """True when the labels are only filled in at the episode's end (slow judges, batched)."""
    pending: bool
    """True on a step of a deferred judge: the values are None here; read `episode["turn_labels"]`."""
    failed: bool
    """True when the judge failed for this turn (labels are then 0 and counted)."""
    analysis: str | None
    """The judge's explanation: `GoldJudge`'s rule trace, or the LLM judge's `analysis` text."""
    error: str | None
    """Why a failed turn failed: `timeout`, `backend`, `malformed`, `exception` or `count_mismatch`."""


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
    subem: float
    """Search-R1's `subem_check`: a normalized gold answer is a substring of the normalized answer."""
    format: float
    """1.0 when the whole trajectory is well formed (`searchgym.rewards.format_valid`), on the last step."""


Outcome = Literal["answered", "out_of_turns"]
"""How the env ended an episode: the agent answered (`terminated`), or ran out of turns (`truncated`)."""


class EpisodeSummary(TypedDict):
    outcome: Outcome
    turns: int
    searches: int
    invalid_actions: int
    em: float
    f1: float
    cover_em: float
    subem: float
    format_valid: bool
    turn_labels: list[TurnLabels | None]
    """Every turn's labels, in order (deferred judges fill them in here)."""
    judge_failures: int
    """How many search turns of this episode the judge failed to label (0 without a judge)."""
    entity_rate: float | None
    """The episode's gold-entity match rate gamma (None without gold entities)."""


class RankerCallRecord(TypedDict):
    """One call of a model ranker (`searchgym.rankers.llm.LLMRanker`), as step info `ranker` holds it."""

    ranker: str
    """Which ranker made the call (`llm`)."""
    question: str
    query: str
    """The sub-query whose candidates were ranked."""
    candidate_ids: list[str]
    """The N candidates, in retriever order."""
    k: int
    messages: list[dict[str, str]]
    """The chat the ranker model was given (what training the ranker replays)."""
    raw_output: str | None
    """The model's reply; None when the backend failed."""
    order: list[int]
    """0-based candidate positions shown, best first (retriever order when the reply did not parse)."""
    valid: bool
    """The reply parsed under the ranker's rules."""
    fallback: bool
    """True when `order` is the retriever-order fallback."""
    error: str | None
    """Why the reply did not parse; None when it did."""
    reason: str | None
    """The reply's `<reason>` text."""
    backend_error: str | None
    """Why the backend failed; None when it answered."""


class _StepFields(TypedDict):
    """The keys of every step's info (the `StepInfo` table above)."""

    schema_version: int
    question_id: str
    turn: int
    action: ActionKind
    invalid_action: bool
    invalid_reason: str | None
    thinking: str
    query: str | None
    answer: str | None
    shown: list[ShownDoc]
    candidates: Candidates | None
    ranker: RankerCallRecord | None
    labels: TurnLabels | None
    labels_reason: str | None
    """Why `labels` is None, and how to get labels; None when the episode is labelled."""
    entities: EntityMatches | None
    reward: RewardParts


class StepInfo(_StepFields, total=False):
    """Step info: `_StepFields`' keys on every step, and `episode` on the step that ends the episode (so
    readers use `info.get("episode")`)."""

    episode: EpisodeSummary


class ResetInfo(TypedDict):
    schema_version: int
    question_id: str
    source: str
    hops: int | None
    num_gold_entities: int
    max_turns: int
    labels_reason: str | None
    """Why this episode's turns will carry no judge labels; None when they will."""


def as_reset_schema(info: ResetInfo, version: int) -> None:
    """Turn `info`, a reset info of this schema, into schema `version`'s keys in place."""
    info["schema_version"] = version
    if version < 3:
        del info["labels_reason"]  # type: ignore[misc]


def as_step_schema(info: StepInfo, version: int) -> None:
    """Turn `info`, a step info of this schema, into schema `version`'s keys in place (schema 1's candidate
    titles come from `candidates_v1` when the search is made)."""
    info["schema_version"] = version
    if version < 3:
        del info["labels_reason"]  # type: ignore[misc]
        info["reward"].pop("subem", None)
        episode = info.get("episode")
        if episode is not None:
            del episode["subem"]  # type: ignore[misc]


def candidates_v1(pool: Sequence[Hit]) -> dict[str, list]:
    """A search's `candidates` in schema 1: `ids`, `titles` and `scores`, in retriever order."""
    return {"ids": [h.doc.id for h in pool], "titles": [h.doc.title for h in pool], "scores": [h.score for h in pool]}


def final_labels(infos: Sequence[StepInfo]) -> list[TurnLabels]:
    """The judge labels of an episode's labelled search rounds, in order: the episode summary's
    `turn_labels` (every turn's final labels, deferred judges' included) when the env ended the episode,
    else the step labels; turns without labels (answers, invalid actions) and labels still pending are
    left out."""
    summary = infos[-1].get("episode") if infos else None
    labels = summary["turn_labels"] if summary else [i.get("labels") for i in infos]
    return [lab for lab in labels if lab and lab.get("contribution") is not None and not lab.get("pending")]


def final_entity_rate(infos: Sequence[StepInfo]) -> float | None:
    """An episode's gold-entity match rate gamma: the summary's `entity_rate` when the env ended the
    episode, else the last step's `entities.rate`; None when the question has no gold entities."""
    if not infos:
        return None
    summary = infos[-1].get("episode")
    if summary:
        return summary["entity_rate"]
    entities = infos[-1].get("entities")
    return None if entities is None else entities["rate"]
