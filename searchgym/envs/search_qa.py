"""`SearchQAEnv`: answer a question by searching a corpus over several text turns."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import gymnasium as gym
import numpy as np

from searchgym.corpus import Corpus, Document
from searchgym.data.records import QARecord
from searchgym.envs.credit import EpisodeCredit, auto_judge, episode_judge
from searchgym.envs.rendering import require_pillow, text_to_rgb
from searchgym.envs.spaces import UnicodeText
from searchgym.errors import BatchError, ConfigError, EpisodeStateError
from searchgym.info import (SCHEMA_VERSION, SCHEMA_VERSIONS, ResetInfo, RewardParts, ShownDoc, StepInfo, as_reset_schema,
                            as_step_schema, candidates_v1)
from searchgym.judges.base import Judge, resolve_judge
from searchgym.protocol import Action, ActionProtocol, resolve_protocol
from searchgym.protocol.tags import DocFormat
from searchgym.rankers import Ranker, resolve_ranker
from searchgym.retrieval import Hit, Retriever, resolve_retriever
from searchgym.rewards import (answer_scores, cover_exact_match, exact_match, f1_score, resolve_episode_reward,
                               shown_documents, substring_exact_match, turn_action)
from searchgym.rewards.answer import AnswerReward

logger = logging.getLogger(__name__)

EntityMatch = Literal["normalized", "exact"]
JudgeMode = Literal["sync", "deferred"]
"""How a gold entity matches the thinking text (the `entity_match` argument)."""

MAX_TEXT = 1_000_000


def _check_scorable(records: Sequence[QARecord], reward: object, by_documents: bool) -> None:
    """A reward that no question can earn is a `ConfigError`: the same score for every episode."""
    if by_documents:
        if not any(r.gold_docs for r in records):
            raise ConfigError(f"answer_reward={reward!r} scores the documents shown against gold documents, and none of "
                              "the questions has any; use an answer reward such as 'em'")
        return
    unanswered = sum(not r.answers for r in records)
    if unanswered == len(records):
        raise ConfigError("none of the questions has a gold answer (BEIR queries are judged by their documents): an "
                          "answer reward scores every episode 0; pass answer_reward='doc_recall' or 'doc_ndcg' "
                          "(the judged documents found), see searchgym.rewards.documents")
    if unanswered:
        logger.warning("%d of %d questions have no gold answer, so the answer reward scores them 0; "
                       "answer_reward='doc_recall' or 'doc_ndcg' scores the documents found", unanswered, len(records))


class SearchQAEnv(gym.Env[str, str]):
    """
    ## Description
    A question-answering environment in which an LLM agent may search a corpus before answering. Each
    episode is one question. The agent writes text; the environment parses the first action in it,
    retrieves a candidate pool for a search, lets a ranker pick the documents to show, and scores a
    final answer against the gold answers. Every step's `info` carries per-turn credit signals (see
    `searchgym.info`).

    ## Action Space
    `UnicodeText`: any string. With the default Search-R1 grammar the action is the first complete
    `<search>query</search> | <answer>text</answer>` in the text; `<think>...</think>` before it is the
    turn's reasoning. With `action_format="tool_calls"` it is a JSON tool call in `<tool_call>` tags.
    Text after the action is ignored.

    ## Observation Space
    `UnicodeText`: `reset` returns the instruction prompt with the question; a search step returns
    `\n\n<information>Doc 1(Title: "t") text\nDoc 2(...) ...</information>\n\n`, byte for byte what
    Search-R1's `_passages2string` writes for the same documents (`doc_format="search-r1"`, the default
    with Search-R1's template; `"plain"` writes the title without quotes); a search that matches nothing
    returns `<information>` holding a hint to search again with other words; an invalid action returns an
    explanation of what is expected. The gold answer never appears in an observation.

    ## Rewards
    0 on every step except the answering one, which gets `answer_reward(answer, gold_answers)`: exact
    match after SQuAD normalization by default (`"f1"`, `"cover_em"`, `"subem"` or any function). EM, F1,
    cover-EM, subem (Search-R1's substring match) and format validity are always reported in `info["reward"]`.
    Questions without answers (BEIR queries) are scored by the documents the episode showed instead:
    `answer_reward="doc_recall"` or `"doc_ndcg"` against the record's judged relevance
    (`searchgym.rewards.documents`); the answer text then only ends the episode.

    ## Credit signals in `info` (schema: `searchgym.info`, docs/step-info.md)
    With a `judge` (by default `GoldJudge` wherever the record carries gold supporting documents or titles;
    otherwise `info["labels_reason"]` says why there are no labels), every search turn is labelled with
    retrieval utility u, reasoning correctness v and contribution p = u * v (`info["labels"]`); a
    deferred judge labels all rounds at the episode's end, in `info["episode"]["turn_labels"]`. A judge failure never raises: the round gets labels 0 and
    `failed=True`. When the question has gold entities, `info["entities"]` reports E-GRPO's whole-phrase
    matches in the thinking text (and, for analysis, in the query and the shown documents) and the
    running match rate gamma; `info["episode"]["entity_rate"]` is the episode's gamma.

    ## Starting State
    A question drawn uniformly from the records with `self.np_random`, or the one chosen by
    `options={"index": i}` (an integer) or `options={"question_id": id}`; any other option or value is a
    `ConfigError` naming it.

    ## Episode End
    Terminated when the agent answers. Truncated when `max_turns` turns pass without an answer (invalid
    actions count as turns). Never both. A retriever that fails (`RetrievalError`, or `RetrievalTimeout`
    once its own bounded retries are spent) raises out of `step` and leaves the episode as it was: the
    same `step(action)` can be called again once the retriever is back.

    ## Arguments
    - `records`: the questions (`QARecord`s).
    - `corpus`: the documents to search; may be None when `retriever` is an object with its own corpus.
    - `retriever`: `"bm25"` (bm25s, default), `"rank_bm25"`, or any `Retriever`.
    - `ranker`: None (retriever order), `"oracle"` (candidates holding a gold answer first: COSEARCH's oracle
      experiment, `searchgym.rankers.oracle`) or any `Ranker`.
    - `answer_reward`: `"em"`, `"f1"`, `"cover_em"`, `"subem"` or a function (prediction, golds) -> float;
      or `"doc_recall"`, `"doc_ndcg"`: the documents shown, for questions with gold documents (BEIR). An
      answer reward over questions of which none has an answer is a `ConfigError`, and so is a document
      reward over questions of which none has gold documents.
    - `action_format`: `"tags"` (Search-R1) or `"tool_calls"`, or any `ActionProtocol`.
    - `template`: the prompt template, with a `{question}` field; defaults to the grammar's own.
    - `doc_format`: how the tag grammar writes documents, `"search-r1"` or `"plain"`; None means
      `"search-r1"` with the default template and `"plain"` with your own.
    - `top_k`: documents shown per search (3). `candidates`: pool retrieved per search (50).
    - `max_turns`: turns before truncation (4). `max_query_chars`: longer queries are invalid (1000).
      These four are integers >= 1: a float, a string or a bool is a `ConfigError` naming the argument.
    - `cache_dir`: where retrieval indexes are cached (`~/.cache/searchgym`; False disables).
    - `judge`: `"auto"` (default: `GoldJudge` for every question whose record carries gold supporting
      documents or titles, as the synthetic world, HotpotQA, 2Wiki, MuSiQue, KILT and BEIR do; no labels for the
      others, with the reason in `info["labels_reason"]`), None (no labels), `"gold"` (`GoldJudge` on every
      question; without gold documents or titles it judges by answer-bearing documents) or any `Judge`,
      e.g. `LLMJudge(backend)`. `judge_mode`: `"sync"` or `"deferred"`; None follows the judge's own
      `deferred` attribute (gold: sync; LLM: deferred).
    - `match_entities`: report gold-entity matches when the question has gold entities (True).
      `entity_match`: how a gold entity matches the thinking text: `"normalized"` (case, accents,
      punctuation and articles ignored, whole phrases; `searchgym.entities`) or `"exact"` (the verbatim
      string, E-GRPO's rule, which its learner asks for).
    - `render_mode`: None, `"ansi"` (the transcript as text) or `"rgb_array"` (the same text drawn as an
      image, needs Pillow; stable-baselines3's `make_vec_env` asks for it).
    - `no_match_hint`: the tag grammar answers a search that matches nothing with a hint (True) or, as
      before 2026-12-04, with an empty `<information></information>` (False).
    - `info_schema`: the step-info schema emitted (`searchgym.info.SCHEMA_VERSIONS`; the current one by
      default): an earlier number emits that schema's keys exactly (see Version History).

    ## Version History
    Every id stays `-v0`. What changed under it, by date; where the earlier behaviour matters for comparing
    results, the argument named brings it back.
    - v0 (2026-12-02): initial version; step-info schema 1.
    - 2026-12-02: a retriever failure raises out of `step` before the episode changes (the turn's text was
      already in the transcript), so the same step can be retried. Tool-call grammar: a tool call holding an
      integer of over 4300 digits is an invalid action (`bad_tool_call`) instead of an exception. The
      synthetic world's oracle trajectories (`world.oracle_trajectory`) state the found fact once in the
      last think.
    - 2026-12-02 and 2026-12-04: `LLMJudge` (a judge you pass) writes untrusted text on one line without
      fences or tags and refuses a verdict copied from the trace (12-02), and takes exactly one JSON object
      with 0/1 labels (12-04). Its labels may differ from before; both close ways to forge a verdict, so
      nothing brings them back.
    - 2026-12-03: step-info schema 2: `info["candidates"]` holds `ids` and `scores`, no longer `titles`.
      `info_schema=1` emits schema 1.
    - 2026-12-04: step-info schema 3: `subem` in `info["reward"]` (answering step) and `info["episode"]`
      (and `answer_reward="subem"`); `labels_reason` in the reset and step info. `info_schema=2` emits
      schema 2.
    - 2026-12-04: with the default template, search results are written as Search-R1 writes them:
      `Doc 1(Title: "Paris") ...`, the corpus's title line with its quotes, where it was
      `Doc 1(Title: Paris) ...`. `doc_format="plain"` writes the earlier text.
    - 2026-12-04: a search that matches nothing returns a hint inside `<information>` (tag grammar), where
      it returned `\\n\\n<information></information>\\n\\n`. `no_match_hint=False` returns the earlier text.
    - 2026-12-04: labels by default: `judge="auto"` (`GoldJudge` for questions with gold supporting
      documents or titles) where the default was `judge=None`. `judge=None` gives the earlier unlabelled
      info.
    - 2026-12-04: a benchmark id refuses another benchmark's question file (`ConfigError`; `format=` or
      `SearchQA-Custom-v0` loads it); an empty corpus file is a `DataError` (it was replaced by the
      question file's paragraphs); a JSON list of `{title, text}` objects reads as a corpus.
    - 2026-12-04, new options that change nothing unless used: `entity_match` (`"exact"`: E-GRPO's rule),
      `render_mode="rgb_array"`, `ranker="oracle"`.
    Rewards, episodes and every observation and info key not listed are unchanged.

    ## Example
    >>> import gymnasium as gym, searchgym
    >>> env = gym.make("SearchQA-Synthetic-v0", num_entities=300, cache_dir=False)
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step("<think>Let me look.</think><search>capital</search>")
    >>> info["action"], terminated, truncated
    ('search', False, False)
    """

    metadata = {"render_modes": ["ansi", "rgb_array"]}

    def __init__(
        self,
        records: Sequence[QARecord],
        corpus: Corpus | None = None,
        *,
        retriever: str | Retriever = "bm25",
        ranker: str | Ranker | None = None,
        answer_reward: str | AnswerReward = "em",
        action_format: str | ActionProtocol = "tags",
        template: str | None = None,
        doc_format: DocFormat | None = None,
        top_k: int = 3,
        candidates: int = 50,
        max_turns: int = 4,
        max_query_chars: int = 1000,
        cache_dir: str | Path | None | bool = None,
        render_mode: str | None = None,
        judge: str | Judge | None = "auto",
        judge_mode: JudgeMode | None = None,
        match_entities: bool = True,
        entity_match: EntityMatch = "normalized",
        no_match_hint: bool = True,
        info_schema: int = SCHEMA_VERSION,
    ):
        if not records:
            raise ConfigError("SearchQAEnv needs at least one question record")
        top_k, candidates = _count("top_k", top_k), _count("candidates", candidates)
        max_turns, max_query_chars = _count("max_turns", max_turns), _count("max_query_chars", max_query_chars)
        if not isinstance(match_entities, (bool, np.bool_)):
            raise ConfigError(f"match_entities must be True or False, got {match_entities!r}")
        if candidates < top_k:
            raise ConfigError(f"candidates ({candidates}) must be >= top_k ({top_k}): the ranker picks top_k from the pool")
        if render_mode not in (None, "ansi", "rgb_array"):
            raise ConfigError(f"render_mode must be None, 'ansi' or 'rgb_array', got {render_mode!r}")
        if render_mode == "rgb_array":
            require_pillow()
        if template is not None and "{question}" not in template:
            raise ConfigError("template must contain a '{question}' field")
        if judge_mode is not None and judge_mode not in get_args(JudgeMode):
            raise ConfigError(f"judge_mode must be None, 'sync' or 'deferred', got {judge_mode!r}")
        if info_schema not in SCHEMA_VERSIONS:
            raise ConfigError(f"info_schema must be one of {SCHEMA_VERSIONS} (searchgym.info), got {info_schema!r}")
        self.info_schema = info_schema
        self.records = list(records)
        self._by_id = {r.id: i for i, r in enumerate(self.records)}
        self._searchable: tuple[object, dict[int, bool | None]] = (None, {})
        """`_gold_docs_searchable` per record index, and the corpus it was worked out for."""
        self.corpus = corpus
        self.retriever = resolve_retriever(retriever, corpus, cache_dir=None if cache_dir is True else cache_dir)
        self.ranker = resolve_ranker(ranker, self.records)
        scorer, self.doc_reward = resolve_episode_reward(answer_reward)
        """`doc_reward`: the document reward the answering step gets (`answer_reward="doc_recall"`...), else None."""
        self.answer_reward = scorer or self.doc_reward
        _check_scorable(self.records, answer_reward, self.doc_reward is not None)
        self.protocol = resolve_protocol(action_format, template=template, max_query_chars=max_query_chars, doc_format=doc_format,
                                         no_match_hint=no_match_hint)
        self.top_k, self.candidates, self.max_turns = top_k, candidates, max_turns
        self._judge_auto = isinstance(judge, str) and judge == "auto"
        """Whether the judge was chosen by `"auto"`: it then labels only questions with gold evidence."""
        self.judge = auto_judge(self.records) if self._judge_auto else resolve_judge(judge)
        self.judge_deferred = bool(self.judge.deferred) if judge_mode is None and self.judge is not None else judge_mode == "deferred"
        self.match_entities = bool(match_entities)
        if entity_match not in get_args(EntityMatch):
            raise ConfigError(f"entity_match must be one of {get_args(EntityMatch)}, got {entity_match!r}")
        self.entity_match = entity_match
        self.render_mode = render_mode
        self.observation_space = UnicodeText(MAX_TEXT)
        self.action_space = UnicodeText(MAX_TEXT)

        self.record: QARecord | None = None
        self.turn = 0
        self.done = True
        self.transcript: list[tuple[str, str]] = []
        self.turn_infos: list[StepInfo] = []
        self._turn_actions: list[str | None] = []
        """`turn_action` of each agent turn so far (what `format_valid` combines)."""
        self._credit: EpisodeCredit | None = None
        self._labels_reason: str | None = None
        """Why this episode's turns carry no judge labels (None when they do)."""

    # -- Gymnasium API ----------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, ResetInfo]:
        super().reset(seed=seed)
        index = self._choose_index(options or {})
        self.record = self.records[index]
        self.turn = 0
        self.done = False
        self.turn_infos = []
        self._turn_actions = []
        judge, self._labels_reason = episode_judge(self.record, self.judge, auto=self._judge_auto)
        self._credit = EpisodeCredit(self.record, judge, deferred=self.judge_deferred,
                                     match_entities=self.match_entities, gold_docs_searchable=self._gold_docs_searchable(index),
                                     entity_match=self.entity_match)
        prompt = self.protocol.render_prompt(self.record.question)
        self.transcript = [("prompt", prompt)]
        info: ResetInfo = {
            "schema_version": SCHEMA_VERSION,
            "question_id": self.record.id,
            "source": self.record.source,
            "hops": self.record.hops,
            "num_gold_entities": len(self.record.gold_entities),
            "max_turns": self.max_turns,
            "labels_reason": self._labels_reason,
        }
        if self.info_schema != SCHEMA_VERSION:
            as_reset_schema(info, self.info_schema)
        return prompt, info

    def step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:
        parsed = self.parse_action(action)
        # A retrieval failure raises here, before any episode state changes: the same step can be retried.
        pool = self.retriever.search([parsed.query or ""], self.candidates)[0] if parsed.kind == "search" else None
        return self.apply_action(action, parsed, pool)

    # -- a step in two halves (what `searchgym.vector` batches) ------------------------------------------

    def parse_action(self, action: str) -> Action:
        """The first half of `step`: checks that an episode is running and parses `action`. Changes nothing,
        so a caller may parse many envs' actions, retrieve for all their searches at once, then call
        `apply_action` on each (`searchgym.vector`)."""
        if self.record is None or self.done:
            raise EpisodeStateError("the episode is over (or never started): call reset() before step()")
        return self._parse(action)

    def apply_action(self, action: str, parsed: Action, pool: Sequence[Hit] | None) -> tuple[str, float, bool, bool, StepInfo]:
        """The second half of `step`: `parsed` is `parse_action(action)` and `pool` what
        `self.retriever.search([parsed.query], self.candidates)[0]` returns for a search (None otherwise).
        Ranks, judges, scores and advances the episode exactly as `step` does."""
        if self.record is None or self.done:
            raise EpisodeStateError("the episode is over (or never started): call reset() before step()")
        if (parsed.kind == "search") != (pool is not None):
            raise BatchError(f"a {parsed.kind!r} action needs {'a' if parsed.kind == 'search' else 'no'} candidate pool; "
                             "pass what parse_action returned and the retriever's hits for its query")
        info = self._new_info(parsed)
        reward, terminated = 0.0, False
        assert self._credit is not None
        if pool is not None:
            observation, shown = self._search(parsed.query or "", pool, info)
            info["labels"], info["entities"] = self._credit.search_turn(self.turn, parsed.thinking, parsed.query or "", shown)
        else:
            if parsed.kind == "answer":
                reward = self._score(parsed.answer or "", info)
                observation, terminated = "", True
            else:
                observation = self.protocol.render_invalid(parsed)
            info["labels"], info["entities"] = self._credit.other_turn(parsed.thinking)
        text = action if isinstance(action, str) else repr(action)
        self.transcript.append(("agent", text))
        # Checked now, while the text is fresh in the CPU cache, rather than all turns at the end.
        self._turn_actions.append(turn_action(text))
        info["reward"]["total"] = reward
        self.turn += 1
        truncated = not terminated and self.turn >= self.max_turns
        self.turn_infos.append(info)
        if terminated or truncated:
            self.done = True
            summary = self._credit.summary(self.turn_infos, self._turn_actions, answered=terminated)
            info["episode"] = summary  # type: ignore[typeddict-unknown-key]
            if "format" not in info["reward"]:
                info["reward"]["format"] = float(info["episode"]["format_valid"])  # type: ignore[typeddict-item]
        if observation:
            self.transcript.append(("env", observation))
        if self.info_schema != SCHEMA_VERSION:
            as_step_schema(info, self.info_schema)
        return observation, reward, terminated, truncated, info

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            return None
        text = "".join(f"[{role}]\n{text}\n" for role, text in self.transcript)
        return text if self.render_mode == "ansi" else text_to_rgb(text)

    # -- steps ------------------------------------------------------------------------------------------

    def _choose_index(self, options: Any) -> int:
        if not isinstance(options, dict):
            raise ConfigError(f"reset options must be a dict such as {{'index': 0}}, got {type(options).__name__}")
        unknown = set(options) - {"index", "question_id"}
        if unknown:
            raise ConfigError(f"unknown reset options {sorted(map(str, unknown))}; use 'index' or 'question_id'")
        if len(options) == 2:
            raise ConfigError("reset options 'index' and 'question_id' both given; choose the question one way")
        if "question_id" in options:
            qid = options["question_id"]
            if isinstance(qid, bool) or not isinstance(qid, (str, int, np.integer)):
                raise ConfigError(f"reset option question_id must be a question id (text), got {type(qid).__name__}")
            try:
                return self._by_id[str(qid)]
            except KeyError:
                raise ConfigError(f"reset option question_id: no question with id {qid!r}") from None
        if "index" in options:
            i = options["index"]
            if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
                raise ConfigError(f"reset option index must be an integer, got {str(i)[:40]!r} ({type(i).__name__})")
            if not 0 <= i < len(self.records):
                raise ConfigError(f"reset option index {i} out of range: {len(self.records)} questions (0 to "
                                  f"{len(self.records) - 1})")
            return int(i)
        return int(self.np_random.integers(len(self.records)))

    def _parse(self, action: object) -> Action:
        if isinstance(action, bytes):
            action = action.decode("utf-8", "replace")
        if not isinstance(action, str):
            return Action("invalid", invalid_reason="not_text")
        return self.protocol.parse(action)

    def _new_info(self, action: Action) -> StepInfo:
        assert self.record is not None
        return {
            "schema_version": SCHEMA_VERSION,
            "question_id": self.record.id,
            "turn": self.turn,
            "action": action.kind,
            "invalid_action": action.kind == "invalid",
            "invalid_reason": action.invalid_reason,
            "thinking": action.thinking,
            "query": action.query,
            "answer": action.answer,
            "shown": [],
            "candidates": None,
            "ranker": None,
            "labels": None,
            "labels_reason": self._labels_reason,
            "entities": None,
            "reward": {},
        }

    def _gold_docs_searchable(self, index: int) -> bool | None:
        """Whether record `index`'s gold document ids are in the corpus searched (None when unknown).
        Worked out once per question and corpus: a question is asked again and again."""
        corpus = self.corpus if self.corpus is not None else getattr(self.retriever, "corpus", None)
        known, answers = self._searchable
        if known is not corpus:
            answers = {}
            self._searchable = (corpus, answers)
        elif index in answers:
            return answers[index]
        record = self.records[index]
        found = None if not record.gold_docs or not isinstance(corpus, Corpus) else any(d in corpus for d in record.gold_docs)
        answers[index] = found
        return found

    def _search(self, query: str, pool: Sequence[Hit], info: StepInfo) -> tuple[str, list[Document]]:
        assert self.record is not None
        ranked = self.ranker.rank(self.record.question, query, pool, self.top_k)
        # Ids and scores only: a candidate's title is `corpus.get(id).title`, and reading 50 titles the
        # retriever's kernel has just pushed out of the CPU cache costs ~3% of a BM25 step.
        if self.info_schema > 1:
            info["candidates"] = {"ids": [h.doc.id for h in pool], "scores": [h.score for h in pool]}
        else:
            info["candidates"] = candidates_v1(pool)  # type: ignore[typeddict-item]
        # The first top_k valid positions of the ranking, in one plain loop: this runs at every search,
        # and in Python 3.11 each comprehension is a call of its own.
        shown: list[ShownDoc] = []
        docs: list[Document] = []
        n = len(pool)
        for i in ranked.order:
            if 0 <= i < n:
                hit = pool[i]
                shown.append({"id": hit.doc.id, "title": hit.doc.title, "score": hit.score, "candidate_rank": i})
                docs.append(hit.doc)
                if len(docs) == self.top_k:
                    break
        info["shown"] = shown
        info["ranker"] = ranked.call
        return self.protocol.render_documents(docs), docs

    def _score(self, answer: str, info: StepInfo) -> float:
        assert self.record is not None
        golds = self.record.answers
        em, f1, cover_em = answer_scores(answer, golds)
        # A whole-token span is a substring, so cover-EM implies subem: only misses pay for the scan.
        subem = 1.0 if cover_em else substring_exact_match(answer, golds)
        reward = self.answer_reward
        parts: RewardParts = info["reward"]
        if self.doc_reward is not None:
            shown = shown_documents([d["id"] for d in i["shown"]] for i in self.turn_infos)
            parts["answer"] = float(self.doc_reward(shown, self.record.relevance))
        else:
            # A named answer reward is one of the metrics just computed: not computed twice.
            parts["answer"] = (em if reward is exact_match else f1 if reward is f1_score else cover_em if reward is cover_exact_match
                               else subem if reward is substring_exact_match else float(reward(answer, golds)))
        parts["em"], parts["f1"], parts["cover_em"], parts["subem"] = em, f1, cover_em, subem
        return parts["answer"]


def _count(name: str, value: Any) -> int:
    """`value` as an int >= 1, or a `ConfigError` naming the argument: 2.5, "3" and True are not counts
    (they were taken as such, or failed far from the call)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {str(value)[:40]!r} ({type(value).__name__})")
    return int(value)
