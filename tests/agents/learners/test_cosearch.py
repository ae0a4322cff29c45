import math

import pytest

from agents.learners.cosearch import (
    CoSearchConfig,
    RankerCall,
    calls_from_trajectory,
    cluster_calls,
    hits_at,
    normalize_query,
    rank_batch,
    ranker_reward,
    score_call,
    select_groups,
)
from searchgym.corpus import Document
from searchgym.errors import BatchError, ConfigError
from searchgym.rankers.llm import LLMRanker
from searchgym.retrieval.base import Hit
from tests.agents.learners.infos import step

GOLDS = ["Paris"]
TEXTS = (
    "Lyon is a city in France.",  # 0
    "The Louvre holds Parisian art.",  # 1: "Parisian" is not the whole token "paris"
    "Paris is the capital of France.",  # 2: relevant
    "Berlin is the capital of Germany.",  # 3
    "The Seine flows through paris.",  # 4: relevant (case-insensitive)
    "Rome is in Italy.",  # 5
)
IDS = tuple(f"d{i}" for i in range(len(TEXTS)))
CONFIG = CoSearchConfig()


def call(order, *, valid=True, query="capital of France", texts=TEXTS):
    return RankerCall(
        query=query, candidate_ids=IDS[: len(texts)], candidate_texts=texts, order=tuple(order), valid=valid
    )


# ---- Eq. 6, branch by branch (alpha = 0.2, gamma = 0.5) ------------------------------------------------


def test_eq6_unparsed_output_is_penalized():
    assert ranker_reward(valid=False, has_answer=True, r_rel=1.0, r_main=0.9) == -0.2
    assert ranker_reward(valid=False, has_answer=False, r_rel=0.0, r_main=0.9) == -0.2


def test_eq6_answerable_low_relevance_gets_r_rel_only():
    assert ranker_reward(valid=True, has_answer=True, r_rel=1 / 3, r_main=0.9) == pytest.approx(1 / 3)
    assert ranker_reward(valid=True, has_answer=True, r_rel=0.5, r_main=0.9) == 0.5  # r_rel <= gamma: boundary


def test_eq6_answerable_high_relevance_adds_r_main():
    assert ranker_reward(valid=True, has_answer=True, r_rel=2 / 3, r_main=0.4) == pytest.approx(2 / 3 + 0.4)


def test_eq6_unanswerable_gets_r_main():
    assert ranker_reward(valid=True, has_answer=False, r_rel=0.0, r_main=0.4) == 0.4


@pytest.mark.parametrize(
    "order, hits, reward",
    [
        # relevant candidates are 2 and 4; r_main = 0.4
        ((2, 0, 1, 3, 5), [1, 1, 1], 1.0 + 0.4),  # r_rel 1 > 0.5
        ((0, 2, 1, 3, 5), [0, 1, 1], 2 / 3 + 0.4),  # r_rel 2/3 > 0.5
        ((0, 1, 3, 5, 4), [0, 0, 1], 1 / 3),  # r_rel 1/3 <= 0.5
        ((0, 1, 3), [0, 0, 0], 0.0),  # the answer was in the pool but not shown
        ((0, 4, 1), [0, 1, 1], 2 / 3 + 0.4),  # three shown: Hit@5 looks at those three
    ],
)
def test_score_call_hits_and_reward(order, hits, reward):
    relevant = [False, False, True, False, True, False]
    assert hits_at(order, relevant) == hits
    score = score_call(call(order), GOLDS, 0.4, CONFIG)
    assert score.has_answer and score.valid
    assert score.r_rel == pytest.approx(sum(hits) / 3)
    assert score.reward == pytest.approx(reward)


def test_score_call_without_answer_in_pool_and_invalid():
    no_answer = TEXTS[:2] + TEXTS[3:4]  # Lyon, Parisian, Berlin: none holds "paris"
    score = score_call(call((0, 1, 2), texts=no_answer), GOLDS, 0.4, CONFIG)
    assert (score.has_answer, score.reward) == (False, 0.4)
    assert score_call(call((2, 0, 1), valid=False), GOLDS, 0.4, CONFIG).reward == -0.2
    # any gold counts: "City of Light" is in none, "Paris" in two
    assert score_call(call((2,)), ["City of Light", "Paris"], 0.0, CONFIG).r_rel == 1.0


# ---- grouping -----------------------------------------------------------------------------------------


def test_normalize_query_drops_case_articles_and_punctuation():
    assert normalize_query("What is THE capital of France?!") == "what is capital of france"
    assert normalize_query("An  apple, a day") == "apple day"


def test_cluster_calls_on_literal_sub_queries():
    queries = [
        "The capital of France?",  # 0 -> "capital of france", answerable: cluster A (representative)
        "capital of France",  # 1 same normalized text: F1 1 -> A
        "Capital, of France!",  # 2 same text but I_ans False: its own cluster B
        "capital city of France",  # 3 F1 with "capital of france": 3 common, p 3/4, r 1 -> 0.857 >= 0.8 -> A
        "capital of Italy",  # 4 2 common, p = r = 2/3 -> 0.667 < 0.8: new cluster C
        "an capital of france",  # 5 article dropped -> A
        "the capital of France",  # 6 I_ans False -> B
    ]
    has_answer = [True, True, False, True, True, True, False]
    assert cluster_calls(queries, has_answer) == [[0, 1, 3, 5], [2, 6], [4]]


def test_cluster_threshold_is_inclusive_and_first_cluster_wins():
    # "red green blue black" vs "red green pink brown": 2 common of 4 -> F1 0.5: two clusters.
    # "red green blue black pink brown" has 4 of 6 in common with each representative:
    # p = 4/6, r = 4/4 -> F1 = 2 * (2/3) / (5/3) = 0.8 >= delta: it joins the first cluster.
    queries = ["red green blue black", "red green pink brown", "red green blue black pink brown"]
    assert cluster_calls(queries, [True] * 3) == [[0, 2], [1]]
    # with delta 0.81 it no longer joins either
    assert cluster_calls(queries, [True] * 3, delta=0.81) == [[0], [1], [2]]


def test_select_groups_drops_small_and_equal_clusters():
    clusters = [[0, 1, 2], [3, 4], [5, 6, 7], [8, 9, 10, 11]]
    rewards = [0.1, 0.5, 0.1, 0.0, 1.0, 0.4, 0.4, 0.4, -0.2, 1.0, 1.0, 1.0]
    # [3, 4] has 2 < 3 calls; [5, 6, 7] all 0.4
    assert select_groups(clusters, rewards) == [[0, 1, 2], [8, 9, 10, 11]]
    assert select_groups(clusters, rewards, min_size=2) == [[0, 1, 2], [3, 4], [8, 9, 10, 11]]


def test_rank_batch_scores_groups_and_advantages():
    mountain = ("Everest is the tallest mountain.", "K2 is second.", "Lhotse is fourth.")
    calls = [
        call((0, 1, 3, 5, 4)),  # r_rel 1/3 -> 1/3
        call((0, 2, 1, 3, 5), query="The capital of France?"),  # r_rel 2/3 -> 2/3 + 0.5 = 7/6
        call((2, 0, 1, 3, 5), query="capital of france"),  # r_rel 1 -> 1.5
        call((0, 1, 2, 3, 4), valid=False, query="Capital of France!"),  # -0.2
        call((2, 4), query="river of Rome"),  # alone: dropped
        *[call((0, 1, 2), query="tallest mountain", texts=mountain) for _ in range(3)],  # all r_main: dropped
    ]
    batch = rank_batch(calls, [GOLDS] * len(calls), [0.5] * len(calls), CONFIG)
    assert [s.reward for s in batch.scores[:4]] == pytest.approx([1 / 3, 7 / 6, 1.5, -0.2])
    assert [s.reward for s in batch.scores[5:]] == [0.5, 0.5, 0.5]
    assert batch.groups == [[0, 1, 2, 3]]
    # rewards [1/3, 7/6, 3/2, -1/5]: mean 2.8 / 4 = 0.7; deviations [-0.366667, 0.466667, 0.8, -0.9];
    # squares 121/900 + 49/225 + 0.64 + 0.81 = 1.802222, / 3 = 0.600741 -> std 0.775075;
    # A = deviation / (std + eps), eps = 1e-6: [-0.473072, 0.602092, 1.032157, -1.161177]
    std = math.sqrt((121 / 900 + 49 / 225 + 0.64 + 0.81) / 3)
    assert sorted(batch.advantages) == [0, 1, 2, 3]
    expected = [d / (std + 1e-6) for d in (-11 / 30, 7 / 15, 0.8, -0.9)]
    assert [batch.advantages[i] for i in range(4)] == pytest.approx(expected, abs=1e-9)
    assert expected == pytest.approx([-0.473072, 0.602092, 1.032157, -1.161177], abs=1e-6)


# ---- the step-info adapter, against the real LLM ranker's record ---------------------------------------


class ScriptedChat:
    def __init__(self, reply: str):
        self.reply = reply

    def chat(self, conversations, *, max_tokens=512, temperature=0.0):
        return [self.reply for _ in conversations]

    def describe(self):
        return {"kind": "scripted"}


def _llm_record(reply: str) -> dict:
    hits = [Hit(Document(i, f"T{i}", t), 1.0) for i, t in zip(IDS, TEXTS)]
    result = LLMRanker(ScriptedChat(reply)).rank("Where is the Louvre?", "capital of France", hits, 3)
    assert result.call is not None
    return result.call


def test_from_info_reads_the_llm_ranker_record():
    record = _llm_record("<reason>3 names it</reason><rerank>[3] > [1] > [5]</rerank>")
    parsed = RankerCall.from_info(record, texts=dict(zip(IDS, TEXTS)), trajectory=4, turn=1)
    assert (parsed.query, parsed.question, parsed.order, parsed.valid) == (
        "capital of France",
        "Where is the Louvre?",
        (2, 0, 4),
        True,
    )
    assert parsed.candidate_texts == TEXTS and (parsed.trajectory, parsed.turn) == (4, 1)
    assert parsed.raw_output.startswith("<reason>") and parsed.messages
    # Hit@1 = Hit@3 = Hit@5 = 1 -> r_rel 1 > 0.5 -> 1 + r_main
    assert score_call(parsed, GOLDS, 0.25, CONFIG).reward == pytest.approx(1.25)
    garbage = RankerCall.from_info(_llm_record("I like [2]"), texts=dict(zip(IDS, TEXTS)))
    assert (garbage.valid, garbage.order) == (False, (0, 1, 2))  # retriever-order fallback
    assert score_call(garbage, GOLDS, 0.25, CONFIG).reward == -0.2


def test_calls_from_trajectory_skips_steps_without_a_ranker():
    record = _llm_record("<reason>r</reason><rerank>[5] > [3] > [1]</rerank>")
    infos = [step(0, "search", ranker=record), step(1, "search"), step(2, "search", ranker=record), step(3, "answer")]
    calls = calls_from_trajectory(infos, texts=lambda doc_id: TEXTS[IDS.index(doc_id)], trajectory=7)
    assert [(c.turn, c.trajectory, c.order) for c in calls] == [(0, 7, (4, 2, 0)), (2, 7, (4, 2, 0))]


def test_from_info_errors_say_what_is_missing():
    record = _llm_record("<reason>r</reason><rerank>[1] > [2] > [3]</rerank>")
    with pytest.raises(BatchError, match="texts="):
        RankerCall.from_info(record)
    with pytest.raises(BatchError, match="no text for candidate"):
        RankerCall.from_info(record, texts={"d0": "x"})
    with pytest.raises(BatchError, match="lacks"):
        RankerCall.from_info({"query": "q"})
    with_texts = dict(record, candidate_texts=list(TEXTS))
    assert RankerCall.from_info(with_texts).candidate_texts == TEXTS
    with pytest.raises(BatchError, match="distinct positions"):
        call((0, 9))
    with pytest.raises(ConfigError, match="min_group_size"):
        CoSearchConfig(min_group_size=1)
    with pytest.raises(ConfigError, match="delta"):
        CoSearchConfig(delta=0.0)
