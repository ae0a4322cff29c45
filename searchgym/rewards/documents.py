"""Document rewards: how well the documents an episode showed cover the judged relevant documents.

For questions that have gold documents but no answer to compare with (BEIR's queries, scored by their
qrels), the env's `answer_reward` can be `"doc_recall"` or `"doc_ndcg"`: the answering step then gets
one of these over every distinct document shown in the episode, in the order first shown (a document
shown again counts once, where it was first shown). The answer text itself is not scored.

`relevance` maps document ids to graded relevance (BEIR's qrels scores; 1 for each gold document where
the data grades none: `QARecord.relevance`); a score > 0 is relevant. Gains are linear, as in trec_eval's
and BEIR's nDCG: DCG = sum over shown position i (1-based) of rel / log2(i + 1), normalised by the DCG of
the best possible list of the same length.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from searchgym.errors import ConfigError
from searchgym.rewards.answer import ANSWER_REWARDS, AnswerReward, resolve_answer_reward

DocumentReward = Callable[[Sequence[str], Mapping[str, float]], float]
"""A reward for the documents an episode showed: (distinct shown ids in order, relevance) -> [0, 1]."""


def shown_documents(rounds: Iterable[Iterable[str]]) -> list[str]:
    """The distinct document ids of `rounds` (each round's shown ids, in order), in first-shown order.

    >>> shown_documents([["d1", "d2"], ["d2", "d3"]])
    ['d1', 'd2', 'd3']
    """
    return list(dict.fromkeys(doc for shown in rounds for doc in shown))


def doc_recall(shown: Sequence[str], relevance: Mapping[str, float]) -> float:
    """The share of relevant documents (score > 0) among `shown`; 0 when nothing is relevant.

    >>> doc_recall(["d1", "d9"], {"d1": 1, "d2": 2, "d3": 0})
    0.5
    """
    relevant = {doc for doc, score in relevance.items() if score > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(shown)) / len(relevant)


def doc_ndcg(shown: Sequence[str], relevance: Mapping[str, float]) -> float:
    """nDCG of `shown` (distinct ids, in order) at its own length, with linear gains; 0 when nothing is
    shown or nothing is relevant.

    >>> round(doc_ndcg(["d9", "d1"], {"d1": 1}), 4)  # (1 / log2(3)) / (1 / log2(2))
    0.6309
    """
    gains = sorted((score for score in relevance.values() if score > 0), reverse=True)[: len(shown)]
    ideal = sum(gain / math.log2(i + 2) for i, gain in enumerate(gains))
    if ideal == 0.0:
        return 0.0
    found = sum(max(relevance.get(doc, 0.0), 0.0) / math.log2(i + 2) for i, doc in enumerate(shown))
    return found / ideal


DOCUMENT_REWARDS: dict[str, DocumentReward] = {"doc_recall": doc_recall, "doc_ndcg": doc_ndcg}


def resolve_episode_reward(reward: str | AnswerReward) -> tuple[AnswerReward | None, DocumentReward | None]:
    """(answer reward, None) for an answer reward's name or a function; (None, document reward) for
    `"doc_recall"` or `"doc_ndcg"`."""
    if isinstance(reward, str) and reward in DOCUMENT_REWARDS:
        return None, DOCUMENT_REWARDS[reward]
    if isinstance(reward, str) and reward not in ANSWER_REWARDS:
        raise ConfigError(
            f"unknown answer reward {reward!r}; choose one of {sorted(ANSWER_REWARDS)} (scores of the answer), "
            f"{sorted(DOCUMENT_REWARDS)} (scores of the documents shown, for questions with gold documents) or "
            "pass a function (prediction, golds) -> float"
        )
    return resolve_answer_reward(reward), None
