"""The per-learner signal metrics, on trajectories built by hand: which groups teach nothing, where CW-GRPO
puts a positive advantage, which groups only E-GRPO's partial credit makes useful, and what COSEARCH's
ranker shows and drops."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from agents.learners.cosearch import CoSearchConfig, RankerCall, rank_batch, ranking_hits
from agents.learners.cw_grpo import CWGRPOConfig
from agents.learners.cw_grpo import batch_advantages as cw_batch
from agents.learners.e_grpo import EGRPOConfig
from agents.learners.e_grpo import batch_advantages as e_batch
from agents.learners.grpo import GRPOConfig
from agents.learners.grpo import batch_advantages as grpo_batch
from agents.train.metrics import zero_advantage_group_share
from tests.agents.learners.infos import trajectory


@dataclass
class Rollout:
    """The attributes `agents.learners.batch.Trajectory` names, for hand-built episodes."""

    group: int
    step_infos: list
    token_ids: list[int] = field(default_factory=lambda: list(range(30)))
    rounds: list[tuple[int, int]] = field(default_factory=list)
    finish_reason: str = "answered"
    gold_answers: list[str] | None = None

    def __post_init__(self) -> None:
        # Ten tokens per round: round t spans [10 t, 10 t + 10).
        self.rounds = [(10 * t, 10 * t + 10) for t in range(len(self.step_infos))]


def test_zero_advantage_groups_counts_groups_of_equal_rewards():
    rollouts = [
        Rollout(0, trajectory(["search", "answer"], em=1.0)), Rollout(0, trajectory(["search", "answer"], em=1.0)),
        Rollout(1, trajectory(["search", "answer"], em=1.0)), Rollout(1, trajectory(["search", "answer"], em=0.0)),
        Rollout(2, trajectory(["answer"], em=0.0)), Rollout(2, trajectory(["answer"], em=0.0)),
    ]
    batch = grpo_batch(rollouts, GRPOConfig())
    assert zero_advantage_group_share(rollouts, batch) == pytest.approx(2 / 3)


def test_zero_advantage_groups_counts_a_group_left_out_of_the_loss():
    rollouts = [Rollout(0, trajectory(["answer"], em=1.0)), Rollout(0, trajectory(["answer"], em=0.0))]
    batch = grpo_batch(rollouts, GRPOConfig())
    assert zero_advantage_group_share(rollouts, batch) == 0.0
    batch.include = [False, False]
    assert zero_advantage_group_share(rollouts, batch) == 1.0


def test_cw_grpo_puts_a_positive_advantage_on_contributing_rounds():
    # The correct rollout searched twice; only its first search round contributed (p = 1, then 0).
    right = Rollout(0, trajectory(["search", "search", "answer"], [1, 0, None], em=1.0))
    wrong = Rollout(0, trajectory(["search", "search", "answer"], [1, 1, None], em=0.0))
    batch = cw_batch([right, wrong], CWGRPOConfig(alpha=float("inf")))
    outcome = float(grpo_batch([right, wrong], GRPOConfig()).advantages[0][0])
    assert outcome > 0
    m = batch.metrics
    # Alpha = inf: the one contributing round of two gets A * 2, the other 0; the wrong rollout is not counted.
    assert m["cw_grpo/rounds_contributing"] == 1.0 and m["cw_grpo/rounds_other"] == 1.0
    assert m["cw_grpo/adv_contributing"] == pytest.approx(2 * outcome)
    assert m["cw_grpo/adv_other"] == 0.0
    # The token advantages agree with the metric: round 0's tokens carry 2A, round 1's nothing.
    assert float(batch.advantages[0][5]) == pytest.approx(2 * outcome)
    assert float(batch.advantages[0][15]) == 0.0


def test_cw_grpo_without_positive_rollouts_reports_no_round_means():
    rollouts = [Rollout(0, trajectory(["search", "answer"], [1, None], em=0.0)) for _ in range(2)]
    m = cw_batch(rollouts, CWGRPOConfig()).metrics
    assert m["cw_grpo/rounds_contributing"] == 0.0
    assert "cw_grpo/adv_contributing" not in m and "cw_grpo/adv_other" not in m


def test_e_grpo_counts_groups_that_only_partial_credit_makes_useful():
    rollouts = [
        # All wrong, different entity rates: GRPO learns nothing here, E-GRPO does.
        Rollout(0, trajectory(["search", "answer"], em=0.0, rate=0.5)), Rollout(0, trajectory(["search", "answer"], em=0.0, rate=0.0)),
        # One right, one wrong: the outcome already differs.
        Rollout(1, trajectory(["search", "answer"], em=1.0, rate=1.0)), Rollout(1, trajectory(["search", "answer"], em=0.0, rate=0.5)),
        # All wrong with equal rates: no signal either way.
        Rollout(2, trajectory(["search", "answer"], em=0.0, rate=0.0)), Rollout(2, trajectory(["search", "answer"], em=0.0, rate=0.0)),
    ]
    batch = e_batch(rollouts, EGRPOConfig())
    assert batch.metrics["e_grpo/partial_credit_only_groups"] == pytest.approx(1 / 3)
    assert zero_advantage_group_share(rollouts, batch) == pytest.approx(1 / 3)


TEXTS = ("Lyon is in France.", "Paris is the capital of France.", "Rome is in Italy.")


def _call(order, *, query="capital of france", texts=TEXTS, valid=True):
    return RankerCall(query, tuple(f"d{i}" for i in range(len(texts))), texts, tuple(order), valid)


def test_ranking_hits_compare_the_shown_order_with_the_retrievers():
    calls = [_call((1, 0, 2)), _call((0, 2, 1)), _call((0, 1, 2), texts=("a", "b", "c"))]
    hits = ranking_hits(calls, [["Paris"]] * 3, ks=(1, 3))
    # The third call holds no answer and is left out; the retriever order puts Paris second in both others.
    assert hits == {"ranker/answerable_calls": 2.0, "ranker/hit@1": 0.5, "ranker/retriever_hit@1": 0.0,
                    "ranker/hit@3": 1.0, "ranker/retriever_hit@3": 1.0}



def test_ranking_hits_compare_as_many_documents_as_the_env_shows():
    # One document shown of three candidates: the retriever side counts its first candidate only, not its first
    # three (Paris is its second), so Hit@3 cannot favour the side that was never shown more.
    hits = ranking_hits([_call((1,)), _call((0,))], [["Paris"]] * 2, ks=(1, 3))
    assert hits == {"ranker/answerable_calls": 2.0, "ranker/hit@1": 0.5, "ranker/retriever_hit@1": 0.0,
                    "ranker/hit@3": 0.5, "ranker/retriever_hit@3": 0.0}


def test_rank_batch_says_why_clusters_were_dropped():
    config = CoSearchConfig(min_group_size=3)
    calls = [
        # Three similar calls with different rewards: kept.
        _call((1, 0)), _call((0, 1)), _call((0, 1), valid=False),
        # Three similar calls, same reward: dropped as flat.
        _call((1, 0), query="river of rome"), _call((1, 0), query="river of rome"), _call((1, 0), query="river of rome"),
        # A lone call: dropped as too small.
        _call((1, 0), query="tallest mountain in italy"),
    ]
    batch = rank_batch(calls, [["Paris"]] * len(calls), [0.0] * len(calls), config, questions=["q"] * len(calls))
    assert batch.groups == [[0, 1, 2]]
    assert (batch.dropped_small, batch.dropped_flat) == (1, 1)
