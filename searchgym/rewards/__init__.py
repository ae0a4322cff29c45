"""Reward and metric functions: pure functions of strings, returning numbers.

`normalize_answer` is SQuAD's (and HotpotQA's) normalization: lowercase, drop punctuation, drop the
articles a/an/the, collapse whitespace. Exact match, token F1 and cover-EM compare a prediction with
every gold answer and keep the best score, as Search-R1, FlashRAG and HotpotQA's evaluator do. Cover-EM
asks for a gold answer as whole tokens of the prediction; `subem` (Search-R1's `subem_check`, FlashRAG's
`Sub_ExactMatch`) for a plain substring of the normalized prediction. `doc_recall` and `doc_ndcg` score
the documents an episode showed against judged relevance instead, for questions without answers (BEIR).
"""

from searchgym.rewards.answer import (
    ANSWER_REWARDS,
    AnswerReward,
    answer_scores,
    cover_exact_match,
    exact_match,
    f1_score,
    normalize_answer,
    resolve_answer_reward,
    substring_exact_match,
    token_f1,
)
from searchgym.rewards.documents import (
    DOCUMENT_REWARDS,
    DocumentReward,
    doc_ndcg,
    doc_recall,
    resolve_episode_reward,
    shown_documents,
)
from searchgym.rewards.format import actions_valid, format_valid, turn_action

__all__ = [
    "ANSWER_REWARDS",
    "AnswerReward",
    "DOCUMENT_REWARDS",
    "DocumentReward",
    "actions_valid",
    "answer_scores",
    "cover_exact_match",
    "doc_ndcg",
    "doc_recall",
    "exact_match",
    "f1_score",
    "format_valid",
    "normalize_answer",
    "resolve_answer_reward",
    "resolve_episode_reward",
    "shown_documents",
    "substring_exact_match",
    "token_f1",
    "turn_action",
]
