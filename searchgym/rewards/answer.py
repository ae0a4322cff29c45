"""Answer metrics with SQuAD-style normalization."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from functools import lru_cache

from searchgym.errors import ConfigError

AnswerReward = Callable[[str, Sequence[str]], float]
"""A reward for a final answer: (prediction, gold answers) -> score in [0, 1]."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
# str.translate drops every ASCII punctuation character in one C-level pass.
_DROP_PUNCT = str.maketrans("", "", string.punctuation)


@lru_cache(maxsize=65536)
def normalize_answer(text: str) -> str:
    """Lowercase, remove punctuation, remove articles, collapse whitespace (SQuAD / HotpotQA).

    Cached: an env scores every answer with EM, F1 and cover-EM, each normalizing the prediction and
    every gold answer, and a question's gold answers come back in every rollout of it.
    """
    text = text.lower().translate(_DROP_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


def cover_exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if any normalized gold answer occurs as a whole-token span in the normalized prediction."""
    pred = f" {normalize_answer(prediction)} "
    for g in golds:
        gold = normalize_answer(g)
        if gold and f" {gold} " in pred:
            return 1.0
    return 0.0


def substring_exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 if any normalized gold answer is a substring of the normalized prediction (`subem`).

    Search-R1's `subem_check` (verl/utils/reward_score/qa_em.py) and FlashRAG's `Sub_ExactMatch`, kept as
    they are: the match need not fall on token boundaries ("210" contains "21", "xlady gaga" contains
    "lady gaga"), and a gold answer that normalizes to nothing (e.g. "The") is in every prediction.
    `cover_exact_match` is the whole-token variant; use this one to compare with numbers those projects
    publish.
    """
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) in pred for g in golds))


def token_f1(prediction: str, gold: str) -> tuple[float, float, float]:
    """(F1, precision, recall) over normalized tokens of one prediction and one gold answer.

    Follows HotpotQA's official evaluator: when either side normalizes to yes/no/noanswer, the two must
    be equal to score anything.
    """
    return _normalized_f1(normalize_answer(prediction), normalize_answer(gold))


def _normalized_f1(pred: str, ref: str) -> tuple[float, float, float]:
    """`token_f1` of two already normalized answers."""
    special = ("yes", "no", "noanswer")
    if (pred in special or ref in special) and pred != ref:
        return 0.0, 0.0, 0.0
    pred_toks, ref_toks = pred.split(), ref.split()
    # The multiset intersection's size (what `Counter & Counter` gives), without building two Counters:
    # answers are a few tokens, and this runs for every gold answer of every answering step.
    left: dict[str, int] = {}
    for t in ref_toks:
        left[t] = left.get(t, 0) + 1
    same = 0
    for t in pred_toks:
        if left.get(t, 0) > 0:
            left[t] -= 1
            same += 1
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(pred_toks)
    recall = same / len(ref_toks)
    return 2 * precision * recall / (precision + recall), precision, recall


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    """The best token F1 of the prediction against any gold answer."""
    return max((token_f1(prediction, g)[0] for g in golds), default=0.0)


def answer_scores(prediction: str, golds: Sequence[str]) -> tuple[float, float, float]:
    """(exact_match, f1_score, cover_exact_match) of one answer, normalizing each text once: the env
    reports all three at every answering step."""
    pred = normalize_answer(prediction)
    spaced = f" {pred} "
    em = f1 = cover = 0.0
    for g in golds:
        gold = normalize_answer(g)
        if pred == gold:
            em = 1.0
        if gold and cover == 0.0 and f" {gold} " in spaced:
            cover = 1.0
        score = _normalized_f1(pred, gold)[0]
        if score > f1:
            f1 = score
    return em, f1, cover


ANSWER_REWARDS: dict[str, AnswerReward] = {
    "em": exact_match,
    "f1": f1_score,
    "cover_em": cover_exact_match,
    "subem": substring_exact_match,
}


def resolve_answer_reward(reward: str | AnswerReward) -> AnswerReward:
    """A reward function from its name (`em`, `f1`, `cover_em`, `subem`) or a callable passed through."""
    if callable(reward):
        return reward
    try:
        return ANSWER_REWARDS[reward]
    except KeyError:
        raise ConfigError(f"unknown answer reward {reward!r}; choose one of {sorted(ANSWER_REWARDS)} or pass a function (prediction, golds) -> float") from None
