"""Checks of `SearchQAEnv`'s arguments and reset options, each a `ConfigError` that names the argument."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np

from searchgym.data.records import QARecord
from searchgym.envs.rendering import require_pillow
from searchgym.errors import ConfigError
from searchgym.info import SCHEMA_VERSIONS

logger = logging.getLogger("searchgym.envs.search_qa")  # the env's own logger: its warnings are the env's

JudgeMode = Literal["sync", "deferred"]
"""When the judge labels a turn (the `judge_mode` argument): at the step, or at the episode's end."""


def check_arguments(*, top_k: Any, candidates: Any, max_turns: Any, max_query_chars: Any, match_entities: Any,
                    render_mode: Any, template: str | None, judge_mode: Any, info_schema: Any) -> tuple[int, int, int, int]:
    """`top_k`, `candidates`, `max_turns` and `max_query_chars` as ints, once every argument passed its check."""
    top_k, candidates = count("top_k", top_k), count("candidates", candidates)
    max_turns, max_query_chars = count("max_turns", max_turns), count("max_query_chars", max_query_chars)
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
    return top_k, candidates, max_turns, max_query_chars


def choose_index(options: Any, n_questions: int, by_id: Mapping[str, int], rng: np.random.Generator) -> int:
    """The question a reset asks, from its `options` (`index` or `question_id`), else drawn by `rng`."""
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
            return by_id[str(qid)]
        except KeyError:
            raise ConfigError(f"reset option question_id: no question with id {qid!r}") from None
    if "index" in options:
        i = options["index"]
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise ConfigError(f"reset option index must be an integer, got {str(i)[:40]!r} ({type(i).__name__})")
        if not 0 <= i < n_questions:
            raise ConfigError(f"reset option index {i} out of range: {n_questions} questions (0 to "
                              f"{n_questions - 1})")
        return int(i)
    return int(rng.integers(n_questions))


def check_scorable(records: Sequence[QARecord], reward: object, by_documents: bool) -> None:
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


def count(name: str, value: Any) -> int:
    """`value` as an int >= 1, or a `ConfigError` naming the argument: 2.5, "3" and True are not counts
    (they were taken as such, or failed far from the call)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {str(value)[:40]!r} ({type(value).__name__})")
    return int(value)
