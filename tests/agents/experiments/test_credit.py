"""The main job's credit view (`agents.experiments.credit`, `credit_report`, `credit_plot`): each learner's
advantages per round, through its own batch function, on one hand-built group whose every number is worked
out here, in the manner of the learners' own tests (tests/agents/learners)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import pytest
import torch

from agents.experiments.credit import VIEW_LEARNERS, credit_view, round_values, view_configs, view_env_options
from agents.experiments.credit_report import credit_section, differs_from_grpo, groups_with_signal, learner_notes, ranker_table
from agents.learners.cosearch import CoSearchConfig, RankerCall, rank_batch
from agents.learners.cosearch_ranker import calls_view
from agents.learners.e_grpo import EGRPOConfig
from agents.learners.grpo import GRPOConfig
from agents.learners.registry import EnvNeeds, register_learner, unregister_learner
from searchgym.errors import BatchError, ConfigError
from tests.agents.learners.infos import trajectory

EPS = 1e-6  # GRPOConfig.eps, added to every group's std
TEXTS = ("Lyon is a city in France.", "The Louvre holds Parisian art.", "Paris is the capital of France.",
         "Berlin is the capital of Germany.", "The Seine flows through paris.")  # candidates 2 and 4 hold "Paris"


@dataclass
class Rollout:
    """What the view reads of a rollout trajectory (`agents.rollout.Trajectory` has these and more)."""

    sample: int
    step_infos: list
    turns: int
    """Agent rounds in the token sequence (one more than the step infos when the last was cut off)."""
    finish_reason: str = "answered"
    group: int = 0
    question_id: str = "q-paris"
    question: str = "Where is the Louvre?"
    gold_answers: list = field(default_factory=lambda: ["Paris"])

    @property
    def rounds(self) -> list[tuple[int, int]]:
        # a 2-token prompt, then per round 2 sampled tokens and 2 observation tokens
        return [(2 + 4 * k, 4 + 4 * k) for k in range(self.turns)]

    @property
    def token_ids(self) -> list[int]:
        return [0] * (2 + 4 * self.turns)


def group() -> list[Rollout]:
    """One question, four rollouts:
    0: search (p=1), search (p=0), right answer; EM 1, F1 1, entity rate 0.5
    1: search (p=0), wrong answer; EM 0, F1 0.5, rate 0.25
    2: search (p=1), search (p=0), wrong answer; EM 0, F1 0, rate 0.5
    3: one search (p=1), then a round cut off at the token budget: the env never ended it; rate 1.0"""
    right = trajectory(["search", "search", "answer"], [1, 0, None], em=1.0, f1=1.0, rate=0.5)
    wrong = trajectory(["search", "answer"], [0, None], em=0.0, f1=0.5, rate=0.25)
    near = trajectory(["search", "search", "answer"], [1, 0, None], em=0.0, f1=0.0, rate=0.5)
    cut = trajectory(["search"], [1], rate=1.0)
    del cut[-1]["episode"]
    return [Rollout(0, right, 3), Rollout(1, wrong, 2), Rollout(2, near, 3), Rollout(3, cut, 2, finish_reason="over_long")]


def ranker_step() -> dict:
    """COSEARCH's ranker in a step of four rollouts of the same question, one call each on the same sub-query
    (one cluster), scored by `rank_batch` and shown by `calls_view`, as `RankerTrainer.train_step` does."""
    orders, valid, f1 = [(2, 0, 1), (0, 1, 3), (0, 4, 1), (0, 1, 2)], [True, True, True, False], [1.0, 0.5, 0.0, 0.0]
    calls = [RankerCall("capital of France", tuple(f"d{i}" for i in range(5)), TEXTS, order=o, valid=v, trajectory=k)
             for k, (o, v) in enumerate(zip(orders, valid))]
    config = CoSearchConfig()
    golds, questions = [["Paris"]] * 4, ["q-paris"] * 4
    return calls_view(calls, rank_batch(calls, golds, f1, config, questions), questions, config.hit_ks, golds)


@pytest.fixture(scope="module")
def view() -> dict:
    return credit_view(group(), view_configs({}))


def test_round_values_reads_each_rounds_span():
    assert round_values(torch.tensor([0.0, 3.0, 3.0, 9.0, 1.5]), [(1, 3), (4, 5), (5, 5)]) == [3.0, 1.5, None]
    with pytest.raises(BatchError, match="outside"):
        round_values(torch.zeros(2), [(1, 3)])


def test_grpo_gspo_and_dr_grpo_by_hand(view):
    # EM [1, 0, 0, 0]: mean 0.25, deviations [0.75, -0.25, -0.25, -0.25], unbiased variance 0.75 / 3 = 0.25, std 0.5
    a = [0.75 / (0.5 + EPS), -0.25 / (0.5 + EPS)]
    expected = [[a[0]] * 3, [a[1]] * 2, [a[1]] * 3, [a[1]] * 2]  # one value on every round, the cut-off one included
    for name in ("grpo", "gspo"):  # GSPO: GRPO's advantages, its own loss
        assert view["learners"][name]["rounds"] == [pytest.approx(r) for r in expected]
        assert view["learners"][name]["include"] == [True] * 4
    # Dr.GRPO: r - mean, no division
    assert view["learners"]["dr-grpo"]["rounds"] == [pytest.approx(r) for r in ([0.75] * 3, [-0.25] * 2, [-0.25] * 3, [-0.25] * 2)]


def test_cw_grpo_moves_the_right_rollouts_advantage_onto_its_contributing_search(view):
    a, b = 0.75 / (0.5 + EPS), -0.25 / (0.5 + EPS)
    # rollout 0: A = 1.5 > 0, search rounds p = [1, 0]: c = [1, 0], T - 1 = 2 -> [3.0, 0.0], the answer keeps 1.5.
    # rollouts 1, 2: A < 0, spread evenly: every round -0.5. Rollout 3: not answered, its cut-off round is one more
    # search round with p = 0 (c uniform as A < 0): [-0.5, -0.5].
    assert view["learners"]["cw-grpo"]["rounds"] == [pytest.approx([2 * a, 0.0, a]), pytest.approx([b, b]), pytest.approx([b] * 3),
                                                     pytest.approx([b, b])]
    assert differs_from_grpo(view, "cw-grpo") == [0]


def test_e_grpo_partial_credit_and_the_over_long_rollout(view):
    # rates [0.5, 0.25, 0.5, 1.0], max 1.0 (the over-long rollout's counts): gamma_hat = rates.
    # rewards: right 1; wrong 0.3 x 0.25 = 0.075 and 0.3 x 0.5 = 0.15; over-long 0 -> [1, 0.075, 0.15, 0]
    e = view["learners"]["e-grpo"]
    assert e["reward"] == pytest.approx([1.0, 0.075, 0.15, 0.0])
    # mean 1.225 / 4 = 0.30625; squared deviations 0.48128906 + 0.05347656 + 0.02441406 + 0.09378906 = 0.65296875,
    # / 3 -> std 0.466536 (as tests/agents/learners/test_e_grpo.py): A = [1.487019, -0.495673, -0.334914, -0.656432]
    std = math.sqrt(0.65296875 / 3)
    advantages = [d / (std + EPS) for d in (0.69375, -0.23125, -0.15625, -0.30625)]
    assert advantages == pytest.approx([1.487019, -0.495673, -0.334914, -0.656432], abs=1e-6)
    assert [r[0] for r in e["rounds"]] == pytest.approx(advantages)
    assert e["include"] == [True, True, True, False]  # the over-long rollout leaves the loss
    assert differs_from_grpo(view, "e-grpo") == [0, 1, 2, 3]


def test_cosearch_agent(view):
    # F1 [1, 0.5, 0] and -0.2 for rollout 3 (no episode end: an invalid format): mean 1.3 / 4 = 0.325,
    # deviations [0.675, 0.175, -0.325, -0.525], squares 0.455625 + 0.030625 + 0.105625 + 0.275625 = 0.8675, / 3
    agent = view["learners"]["cosearch"]
    assert agent["reward"] == pytest.approx([1.0, 0.5, 0.0, -0.2])
    std = math.sqrt(0.8675 / 3)
    assert [r[0] for r in agent["rounds"]] == pytest.approx([d / (std + EPS) for d in (0.675, 0.175, -0.325, -0.525)])


def test_the_rankers_calls_as_its_update_scores_them():
    # Eq. 6 (relevant candidates 2 and 4; r_main = the rollout's F1):
    # (2, 0, 1): Hit@1,3,5 = 1, 1, 1 -> r_rel 1 > 0.5 -> 1 + 1 = 2
    # (0, 1, 3): no hit -> r_rel 0 <= 0.5 -> 0
    # (0, 4, 1): 0, 1, 1 -> 2/3 > 0.5 -> 2/3 + 0 (F1 0)
    # unparsed: -0.2 (its order is the retriever's fallback (0, 1, 2): no hit at 1, one at 3)
    step = ranker_step()
    calls = step["calls"]
    assert [c["reward"] for c in calls] == pytest.approx([2.0, 0.0, 2 / 3, -0.2])
    assert [c["hits"] for c in calls] == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    # one cluster (same question, I_ans and sub-query), 4 calls: mean 2.466667 / 4 = 0.616667, deviations
    # [1.383333, -0.616667, 0.05, -0.816667], squares 1.913611 + 0.380278 + 0.0025 + 0.666944 = 2.963333, / 3
    std = math.sqrt((1.913611 + 0.380278 + 0.0025 + 0.666944) / 3)
    assert [c["advantage"] for c in calls] == pytest.approx([d / (std + EPS) for d in (1.383333, -0.616667, 0.05, -0.816667)], abs=1e-5)
    assert [c["cluster"] for c in calls] == [0, 0, 0, 0]
    assert (step["groups"], step["dropped_small"], step["dropped_flat"]) == (1, 0, 0)
    # the table names the question as the shared batch numbers it
    view = {**credit_view(group(), view_configs({}, ("grpo",))), "ranker": step}
    row = next(line for line in ranker_table(view).splitlines() if line.startswith("| 1 |"))
    assert [c.strip() for c in row.strip("|").split("|")] == ["1", "1", "q1", "capital of France", "yes", "yes", "1/1/1", "1.00",
                                                              "1.00", "+2.00", "1", "+1.39"]
    assert "4 ranker calls (3 parsed, 4 with an answer among the candidates); 1 clusters kept" in learner_notes(view)["ranker"]


def test_a_dropped_cluster_gives_no_advantage():
    # three calls, two of them on another sub-query: clusters of 1 and 2, both under 3 calls
    calls = [RankerCall(q, tuple(f"d{i}" for i in range(5)), TEXTS, order=(2,), valid=True, trajectory=k)
             for k, q in enumerate(["capital of France", "river of Rome", "river of Rome"])]
    golds, questions = [["Paris"]] * 3, ["q"] * 3
    step = calls_view(calls, rank_batch(calls, golds, [1.0, 0.0, 0.5], CoSearchConfig(), questions), questions, (1, 3, 5), golds)
    assert [(c["cluster"], c["advantage"]) for c in step["calls"]] == [(None, None)] * 3
    assert (step["groups"], step["dropped_small"]) == (0, 2)


def test_the_batch_rows(view):
    rows = view["rollouts"]
    assert [(r["em"], r["f1"], r["entity_rate"], r["format_valid"]) for r in rows] == [
        (1.0, 1.0, 0.5, True), (0.0, 0.5, 0.25, True), (0.0, 0.0, 0.5, True), (0.0, 0.0, 1.0, False)]
    assert [r["action"] for r in rows[3]["rounds"]] == ["search", "cut"]
    assert [(r["u"], r["v"]) for r in rows[0]["rounds"]] == [(1, 1), (0, 0), (None, None)]


def test_notes_and_table_say_what_each_learner_did(view):
    notes = learner_notes(view)
    assert notes["cw-grpo"].startswith("moved the advantage between rounds on 1 of 4 rollouts")
    assert "3 with a negative advantage" in notes["cw-grpo"]
    assert notes["e-grpo"].startswith("partial credit for 2 of 2 wrong, well-formed answers")
    assert "1 over-long rollouts left out of the loss" in notes["e-grpo"]
    assert notes["gspo"].startswith("GRPO's advantages, always")
    assert groups_with_signal(view, "grpo") == (1, 1)
    table = credit_section(view)
    row = next(line for line in table.splitlines() if line.startswith("| q1 | 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "S11 S00 A"
    assert cells[6:8] == ["+1.50", "+3.00 / +0.00 / +1.50"]  # GRPO, CW-GRPO
    assert cells[8:] == ["+1.49", "+1.26", "+0.75"]  # E-GRPO, COSEARCH agent, Dr.GRPO
    third = [c.strip() for c in next(line for line in table.splitlines() if line.startswith("| q1 | 3 |")).strip("|").split("|")]
    assert third[8:] == ["-0.33 (r 0.15)", "-0.60", "-0.25"]  # a learner's reward is shown where it is not EM
    fourth = [c.strip() for c in next(line for line in table.splitlines() if line.startswith("| q1 | 4 |")).strip("|").split("|")]
    assert third[2] == "S11 S00 A" and fourth[2] == "S11 X" and fourth[8] == "-0.66 out of the loss"


def test_cw_grpo_gives_grpos_signal_when_every_search_contributed():
    # Both searches of the right answer contributed: c = [1/2, 1/2], T - 1 = 2 -> every round A_i: nothing moves.
    rollouts = group()[:2]
    rollouts[0].step_infos = trajectory(["search", "search", "answer"], [1, 1, None], em=1.0, f1=1.0, rate=0.5)
    view = credit_view(rollouts, view_configs({}, ("grpo", "cw-grpo")))
    assert differs_from_grpo(view, "cw-grpo") == []
    # EM [1, 0]: std sqrt(0.5) -> A = +-0.5 / 0.707107
    assert learner_notes(view)["cw-grpo"] == ("GRPO's signal on every rollout, nothing to move: 1 with a negative advantage, which "
                                              "CW-GRPO spreads evenly over the rounds; 1 with a positive advantage and every search "
                                              "round contributing (u = v = 1)")


def test_env_options_merge_what_the_learners_ask_for():
    assert view_env_options(view_configs({}), "gold") == {"entity_match": "exact", "judge": "gold"}
    assert view_env_options(view_configs({"e-grpo": {"entity_match": "normalized"}}), None) == {"entity_match": "normalized"}

    class Other(GRPOConfig):
        pass

    register_learner("loose-match", config=Other, needs=EnvNeeds(env_options=lambda c: {"entity_match": "normalized"}))(
        lambda trajectories, config: None)
    try:
        with pytest.raises(ConfigError, match="two values of the env option 'entity_match'"):
            view_env_options({"e-grpo": EGRPOConfig(), "loose-match": Other()}, "gold")
    finally:
        unregister_learner("loose-match")


def test_a_config_of_another_learner_is_refused():
    with pytest.raises(ConfigError, match="not its CWGRPOConfig"):
        credit_view(group(), {"cw-grpo": GRPOConfig()})
    with pytest.raises(BatchError, match="at least one rollout"):
        credit_view([], view_configs({}))
    assert VIEW_LEARNERS[:4] == ("grpo", "cw-grpo", "e-grpo", "cosearch")


def test_the_figure_colours_each_round_by_its_advantage(view, tmp_path):
    pytest.importorskip("matplotlib")
    from agents.experiments.credit_plot import plot_credit

    fig = plot_credit({**view, "ranker": ranker_step(), "batch": {"questions": 1, "group": 4}}, tmp_path / "credit.png")
    assert (tmp_path / "credit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    panels = {ax.get_title(loc="left").split("\n")[0]: ax for ax in fig.axes if ax.get_title(loc="left")}
    assert {"GRPO", "CW-GRPO", "E-GRPO", "COSEARCH agent", "COSEARCH ranker", "GSPO", "Dr.GRPO"} <= set(panels)
    cw = panels["CW-GRPO"].get_images()[0].get_array()
    assert [float(v) for v in cw[0]] == pytest.approx([3.0, 0.0, 1.5], abs=1e-4)
    assert bool(cw.mask[1][2])  # rollout 1 has no third round
    caption = panels["CW-GRPO"].get_title(loc="left").split("\n")[1:]
    assert len(caption) == 2 and "(1/4)" in caption[1]
    assert "changes only the loss" in panels["GSPO"].get_title(loc="left")
    # E-GRPO gives this group signal as GRPO does (1 of 1 groups), with its wrong answers pushed down by how many entities they named
    assert "pushed down less" in panels["E-GRPO"].get_title(loc="left")
    # COSEARCH's ranker: its own rollouts as rows, labelled in a first column; round 1 holds each call
    ranker = panels["COSEARCH ranker"]
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ranker.texts}
    assert [cells[(i, 0)] for i in range(4)] == ["q1 #1 F1 1.00", "q1 #2 F1 0.50", "q1 #3 F1 0.00", "q1 #4 F1 0.00"]
    assert [cells[(i, 1)] for i in range(4)] == ["r+2.00", "r+0.00", "r+0.67", "r-0.20"]
    assert float(ranker.get_images()[0].get_array()[0][1]) == pytest.approx(1.391866, abs=1e-5)


def test_the_main_job_has_a_view_and_ends_with_what_to_do_next(tmp_path):
    from agents.experiments import learners
    from agents.experiments.presets import PRESETS

    assert (PRESETS["cpu"].credit_questions, PRESETS["cpu"].credit_group) == (4, 8)
    assert learners._preset(learners.build_parser().parse_args(["--preset", "cpu", "--credit-questions", "0"])).credit_questions == 0
    with pytest.raises(ConfigError, match="credit_group must be >= 2"):
        replace(PRESETS["tiny"], credit_group=1)
    lines = learners.next_steps(tmp_path, "start/model", "cpu").splitlines()
    assert lines[1] == "What next:"
    assert "--preset cpu-learn" in lines[2] and "agents.experiments.signatures --model start/model" in lines[3]
    assert f"agents.experiments.compare --reference {tmp_path / 'results.json'}" in lines[4]
    assert "docs/frameworks.md" in lines[5] and "docs/credit-view.md" in lines[6]
    # the learning check itself is not told to run the learning check
    assert "cpu-learn" not in learners.next_steps(tmp_path, "start/model", "cpu-learn")


def test_e_grpo_partial_credit_that_changes_nothing_is_said_so():
    # Right answer EM 1; two wrong answers with the same entity rate 0.5 (max 0.5 -> gamma_hat 1): rewards [1, 0.3, 0.3],
    # an affine map of EM [1, 0, 0] within the group, so the same advantages: (r - mean) / std is unchanged.
    infos = [trajectory(["search", "answer"], [1, None], em=em, f1=em, rate=0.5) for em in (1.0, 0.0, 0.0)]
    view = credit_view([Rollout(k, i, 2) for k, i in enumerate(infos)], view_configs({}, ("grpo", "e-grpo")))
    assert view["learners"]["e-grpo"]["reward"] == pytest.approx([1.0, 0.3, 0.3])
    assert differs_from_grpo(view, "e-grpo") == []
    assert learner_notes(view)["e-grpo"].startswith("GRPO's signal: partial credit for 2 of 2 wrong, well-formed answers, but the same "
                                                    "within each group")
