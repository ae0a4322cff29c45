"""Literal cases for each place where the learners follow the papers' or the official code's choice, and
the per-learner defaults those choices set."""

import math

import pytest
import torch

from agents.core import clipped_surrogate
from agents.learners import CoSearchConfig, CWGRPOConfig, EGRPOConfig, GRPOConfig, get_learner
from agents.learners.cosearch import (
    RankerCall,
    agent_rewards,
    cluster_calls,
    normalize_query,
    rank_batch,
    relevance_text,
    score_call,
    unigram_f1,
)
from searchgym.errors import ConfigError
from tests.agents.learners.infos import step

# ---- COSEARCH: sub-query normalization (punctuation becomes a space) ---------------------------------------


def test_punctuation_becomes_a_space_as_in_the_official_code():
    assert normalize_query("Obama's wife") == "obama s wife"
    assert normalize_query("Jean-Paul Sartre, the writer") == "jean paul sartre writer"
    # "obama s wife" vs "obama wife": 2 common tokens, p = 2/3, r = 1 -> F1 = 2 * (2/3) / (5/3) = 0.8
    # (deleting the apostrophe gave "obamas wife": 1 common, p = r = 1/2 -> 0.5)
    assert unigram_f1(normalize_query("obama's wife"), normalize_query("obama wife")) == pytest.approx(0.8)
    assert cluster_calls(["obama's wife", "obama wife"], [True, True], delta=0.8) == [[0, 1]]


# ---- COSEARCH: clusters per question first, then by similarity ----------------------------------------------


def _call(query, question, order=(0, 1)):
    texts = ("Paris is the capital of France.", "Lyon is in France.", "Rome is in Italy.")
    return RankerCall(query=query, candidate_ids=("a", "b", "c"), candidate_texts=texts, order=order, valid=True,
                      question=question)


def test_clusters_never_mix_questions():
    queries = ["capital of france"] * 4
    # two questions x two calls, all answerable: one cluster per question
    assert cluster_calls(queries, [True] * 4, questions=["q1", "q2", "q1", "q2"]) == [[0, 2], [1, 3]]
    # without question keys (or with grouping across questions) they form one cluster
    assert cluster_calls(queries, [True] * 4) == [[0, 1, 2, 3]]


def test_rank_batch_groups_by_question_by_default():
    # Three calls per question, same sub-query; rankings differ so rewards differ within each question.
    orders = [(0, 1), (1, 0), (1, 2)]
    calls = [_call("capital of France", q, o) for q in ("Q1", "Q2") for o in orders]
    golds, r_main = [["Paris"]] * 6, [0.0] * 6
    by_question = rank_batch(calls, golds, r_main, CoSearchConfig())
    assert by_question.groups == [[0, 1, 2], [3, 4, 5]]
    across = rank_batch(calls, golds, r_main, CoSearchConfig(group_by_question=False))
    assert across.groups == [[0, 1, 2, 3, 4, 5]]
    # explicit question ids win over the calls' question texts
    ids = rank_batch(calls, golds, r_main, CoSearchConfig(), questions=["x"] * 6)
    assert ids.groups == [[0, 1, 2, 3, 4, 5]]


# ---- COSEARCH: a document is relevant by its title or its text ----------------------------------------------


def test_relevance_reads_the_title():
    texts = (relevance_text("Paris", "The city of light."), relevance_text("Lyon", "A city on the Rhone."))
    call = RankerCall(query="q", candidate_ids=("a", "b"), candidate_texts=texts, order=(1, 0), valid=True)
    score = score_call(call, ["Paris"], 0.0, CoSearchConfig())
    # relevant only through its title; shown second: Hit@1 0, Hit@3 1, Hit@5 1 -> r_rel 2/3 > 0.5 -> 2/3 + 0
    assert score.has_answer and score.r_rel == pytest.approx(2 / 3) and score.reward == pytest.approx(2 / 3)
    text_only = RankerCall(query="q", candidate_ids=("a", "b"), candidate_texts=("The city of light.", "A city on the Rhone."),
                           order=(1, 0), valid=True)
    assert not score_call(text_only, ["Paris"], 0.0, CoSearchConfig()).has_answer


# ---- COSEARCH: the agent's reward is F1 with a -0.2 format penalty ----------------------------------------


class _T:
    def __init__(self, infos):
        self.step_infos = infos


def _answered(em, f1, format_valid):
    last = step(1, "answer", em=em, f1=f1)
    last["episode"] = {"em": em, "f1": f1, "format_valid": format_valid}
    return _T([step(0, "search"), last])


def test_cosearch_agent_reward_is_f1_with_a_format_penalty():
    batch = [_answered(0.0, 0.5, True), _answered(1.0, 1.0, True), _answered(0.0, 0.4, False)]
    assert agent_rewards(batch, CoSearchConfig()) == pytest.approx([0.5, 1.0, -0.2])
    assert agent_rewards(batch, CoSearchConfig(agent_format_penalty=None)) == pytest.approx([0.5, 1.0, 0.4])
    assert agent_rewards(batch, CoSearchConfig(reward_key="em", agent_format_penalty=0.5)) == pytest.approx([0.0, 1.0, -0.5])
    with pytest.raises(ConfigError, match="agent_format_penalty"):
        CoSearchConfig(agent_format_penalty=-0.2)


# ---- dual clip ---------------------------------------------------------------------------------------------


def test_dual_clip_caps_the_loss_of_negative_advantages():
    # ratios e^log: 5, 5, 2 with A = -1, +1, -1; eps 0.2 / 0.28
    new = torch.log(torch.tensor([[5.0, 5.0, 2.0]]))
    old = torch.zeros(1, 3)
    adv = torch.tensor([[-1.0, 1.0, -1.0]])
    mask = torch.ones(1, 3)
    plain, *_ = clipped_surrogate(new, old, adv, mask)
    # A < 0: -min(5 * -1, 1.28 * -1) = 5;  A > 0: -min(5, 1.28) = -1.28;  ratio 2: -min(-2, -1.28) = 2
    torch.testing.assert_close(plain, torch.tensor([[5.0, -1.28, 2.0]]))
    dual, *_ = clipped_surrogate(new, old, adv, mask, clip_ratio_c=3.0)
    # the first is capped at -A * 3 = 3; the others are unchanged (A > 0, or 2 < 3)
    torch.testing.assert_close(dual, torch.tensor([[3.0, -1.28, 2.0]]))
    with pytest.raises(ConfigError, match="clip_ratio_c"):
        clipped_surrogate(new, old, adv, mask, clip_ratio_c=1.0)
    with pytest.raises(ConfigError, match="clip_ratio_c"):
        GRPOConfig(clip_ratio_c=0.5)


# ---- per-learner defaults: KL and dual clip as the official runs, exact entity match for E-GRPO -------------


def test_each_learner_defaults_to_its_official_settings():
    assert (GRPOConfig().kl_coef, GRPOConfig().clip_ratio_c) == (0.0, None)
    assert (CWGRPOConfig().kl_coef, CWGRPOConfig().clip_ratio_c, CWGRPOConfig().alpha) == (0.001, 3.0, math.inf)
    assert (CoSearchConfig().kl_coef, CoSearchConfig().clip_ratio_c) == (0.001, 3.0)
    assert (CoSearchConfig().reward_key, CoSearchConfig().agent_format_penalty) == ("f1", 0.2)
    assert (EGRPOConfig().kl_coef, EGRPOConfig().clip_ratio_c, EGRPOConfig().entity_match) == (0.0, None, "exact")
    assert get_learner("e-grpo").needs.options(EGRPOConfig()) == {"entity_match": "exact"}
    assert get_learner("e-grpo").needs.options(EGRPOConfig(entity_match="normalized")) == {"entity_match": "normalized"}
    with pytest.raises(ConfigError, match="entity_match"):
        EGRPOConfig(entity_match="fuzzy")
