"""The signature analyses: each on hand-built rollouts with the expected values worked out here, the
rollout readers on real env episodes, and the command end to end with the tiny random model."""

import json
import math
from types import SimpleNamespace

import gymnasium as gym
import pytest

import searchgym  # noqa: F401 - registers the ids
from agents.experiments.signature_analyses import (
    contribution_spread,
    entity_contrast,
    episode_em,
    episode_entity_rate,
    f1_gain,
    group_outcomes,
    search_contributions,
    search_hits,
    successful_rounds,
)
from agents.experiments.signatures import main
from searchgym.errors import ConfigError
from tests.helpers import shared_file


def traj(step_infos):
    return SimpleNamespace(step_infos=step_infos)


def labels(p):
    return {"retrieval_utility": p, "reasoning_correctness": p, "contribution": p, "pending": False}


def search(p, qid="q", pool=(), shown=()):
    return {"action": "search", "question_id": qid, "labels": labels(p), "candidates": {"ids": list(pool), "scores": [0.0] * len(pool)},
            "shown": [{"id": i} for i in shown]}


def answer(em, rate, turn_labels=None):
    episode = {"em": em, "entity_rate": rate}
    if turn_labels is not None:
        episode["turn_labels"] = turn_labels
    return {"action": "answer", "labels": {"contribution": None}, "episode": episode}


# -- E-GRPO ------------------------------------------------------------------------------------------------

def test_entity_contrast_counts_each_kind_of_question():
    groups = [
        [(1, 0.5), (1, 1.0), (0, 0.0), (0, 0.5)],  # correct mean 0.75 > wrong mean 0.25: correct higher
        [(1, 0.0), (0, 1.0), (0, 0.5)],            # 0.0 < 0.75: wrong higher
        [(1, 1 / 3), (0, 0.5), (0, 1 / 6)],        # 1/3 vs (1/2 + 1/6) / 2 = 1/3: a tie (within float noise)
        [(1, 1.0), (1, 0.5)],                      # all correct: left out
        [(0, 0.0), (0, 1.0)],                      # all wrong: left out
        [(1, 1.0), (0, 0.0)],                      # 1.0 > 0.0: correct higher
    ]
    c = entity_contrast(groups)
    assert (c.questions, c.correct_higher, c.wrong_higher, c.ties, c.unmixed) == (6, 2, 1, 1, 2)
    assert c.ratio == pytest.approx(2.0)
    # Means over the four mixed questions: correct (0.75 + 0 + 1/3 + 1) / 4, wrong (0.25 + 0.75 + 1/3 + 0) / 4.
    assert c.mean_rate_correct == pytest.approx((0.75 + 0 + 1 / 3 + 1) / 4)
    assert c.mean_rate_wrong == pytest.approx((0.25 + 0.75 + 1 / 3 + 0) / 4)


def test_entity_contrast_without_mixed_questions_has_no_ratio():
    c = entity_contrast([[(1, 1.0), (1, 0.0)], [(0, 0.5), (0, 0.5)]])
    assert (c.correct_higher, c.wrong_higher, c.unmixed) == (0, 0, 2)
    assert math.isnan(c.ratio) and math.isnan(c.mean_rate_correct) and math.isnan(c.mean_rate_wrong)
    assert entity_contrast([[(1, 1.0), (0, 0.0)]]).ratio == math.inf  # 1 vs 0


def test_group_outcomes_reads_em_and_rate_and_splits_groups():
    over_long = traj([{"action": "search", "entities": {"rate": 0.5}}])  # never answered: EM 0, the running rate
    trajectories = [traj([answer(1.0, 1.0)]), over_long, traj([answer(0.0, None)]), traj([answer(0.0, 0.25)])]
    assert group_outcomes(trajectories, 2) == [[(1.0, 1.0), (0.0, 0.5)], [(0.0, 0.0), (0.0, 0.25)]]
    with pytest.raises(ConfigError, match="groups of 3"):
        group_outcomes(trajectories, 3)


# -- CW-GRPO -----------------------------------------------------------------------------------------------

def test_contribution_spread_histograms_and_positions():
    rounds = [[1, 0], [1, 1], [0, 1, 0], [1], []]
    s = contribution_spread(rounds)
    # Four trajectories searched (one answered at once); 2 + 2 + 3 + 1 = 8 rounds, of which 1+2+1+1 = 5 have p = 1.
    assert (s.trajectories, s.no_search, s.rounds) == (4, 1, 8)
    assert s.contributing_share == pytest.approx(5 / 8)
    assert s.contributing == {1: 3, 2: 1}     # contributing rounds per trajectory: 1, 2, 1, 1
    assert s.searches == {1: 1, 2: 2, 3: 1}   # search rounds per trajectory: 2, 2, 3, 1
    # 1st rounds: 1, 1, 0, 1 -> 3/4; 2nd: 0, 1, 1 -> 2/3; 3rd: 0 -> 0.
    assert s.by_position[0] == (4, pytest.approx(3 / 4))
    assert s.by_position[1] == (3, pytest.approx(2 / 3))
    assert s.by_position[2] == (1, 0.0)


def test_contribution_spread_of_nothing():
    s = contribution_spread([])
    assert (s.trajectories, s.rounds, s.contributing, s.by_position) == (0, 0, {}, [])
    assert math.isnan(s.contributing_share)


def test_search_contributions_prefer_episode_labels_and_skip_other_turns():
    invalid = {"action": "invalid", "labels": {"contribution": None}}
    # Step labels say 1, 0; the episode's turn labels (a deferred judge's) say 0, 1: those win.
    infos = [search(1), invalid, search(0), answer(1.0, 1.0, turn_labels=[labels(0), None, labels(1), None])]
    assert search_contributions(infos) == [0, 1]
    # Without a full set of episode labels, each step's; a failed or missing label is p = 0.
    assert search_contributions([search(1), {"action": "search", "labels": None}, search(0), answer(1.0, 1.0)]) == [1, 0, 0]


def test_successful_rounds_keep_em_one_only():
    trajectories = [traj([search(1), search(0), answer(1.0, 1.0)]), traj([search(1), answer(0.0, 0.5)]), traj([answer(1.0, 0.0)])]
    assert successful_rounds(trajectories) == [[1, 0], []]


def test_readers_on_real_env_episodes():
    """The synthetic world's oracle turns, and a detour, through the env with the gold judge."""
    env = gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=(2,), split="test", num_questions=3, judge="gold",
                   entity_match="exact", top_k=1, max_turns=4, cache_dir=False)
    world = env.unwrapped.world

    def episode(turns):
        env.reset(options={"index": 0})
        return [env.step(t)[-1] for t in turns(world.oracle_trajectory(env.unwrapped.record))]

    solved = episode(lambda t: t)                              # hop 1, hop 2, the answer
    assert (search_contributions(solved), episode_em(solved), episode_entity_rate(solved)) == ([1, 1], 1.0, 1.0)
    # Hop 1 twice (the repeat shows nothing new: u = 0), an unparsable turn, hop 2, then out of turns: EM 0,
    # and only the bridge entity named in the thinking so far (1 of 2 gold entities).
    detour = episode(lambda t: [t[0], t[0], "<think>hmm</think>", t[1]])
    assert (search_contributions(detour), episode_em(detour), episode_entity_rate(detour)) == ([1, 0, 1], 0.0, 0.5)
    guess = episode(lambda t: ["<think>A guess.</think><answer>nobody</answer>"])
    c = entity_contrast(group_outcomes([traj(solved), traj(detour), traj(guess)], 3))
    # Correct mean rate 1.0 against wrong (0.5 + 0) / 2 = 0.25.
    assert (c.correct_higher, c.wrong_higher, c.mean_rate_wrong) == (1, 0, 0.25)


# -- COSEARCH ----------------------------------------------------------------------------------------------

def test_f1_gain():
    assert f1_gain(0.40, 0.50) == (pytest.approx(0.10), pytest.approx(0.25))  # +0.10 points is +25% of 0.40
    assert f1_gain(0.5, 0.4) == (pytest.approx(-0.1), pytest.approx(-0.2))
    change, relative = f1_gain(0.0, 0.2)
    assert change == pytest.approx(0.2) and math.isnan(relative)


def test_search_hits_over_search_steps():
    holds = {"a", "c"}  # documents holding an answer

    def check(qid, ids):
        return any(i in holds for i in ids)

    trajectories = [traj([search(1, pool=["b", "a"], shown=["b"]), search(1, pool=["c"], shown=["c"]), answer(1.0, 1.0)]),
                    traj([search(0, pool=["b", "d"], shown=["d"]), {"action": "invalid"}])]
    # Three searches: pools hold an answer in 2 (b,a and c), shown documents in 1 (c).
    assert search_hits(trajectories, check, check) == {"searches": 3.0, "answer_in_pool": pytest.approx(2 / 3),
                                                       "answer_shown": pytest.approx(1 / 3)}
    assert math.isnan(search_hits([], check, check)["answer_in_pool"])


# -- the command -------------------------------------------------------------------------------------------

def test_command_end_to_end_with_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "sig"
    assert main(["--model", "tiny", "--questions", "3", "--group", "2", "--entities", "300", "--threads", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for figure in ("1939 vs 487", "few key rounds", "+14.7% F1"):
        assert figure in printed
    results = json.loads((out / "results.json").read_text())
    (sampled,) = results["sampled"]
    ec = sampled["entity_contrast"]
    assert sampled["setting"] == "synthetic" and sampled["questions"] == 3
    assert ec["questions"] == 3 and ec["correct_higher"] + ec["wrong_higher"] + ec["ties"] + ec["unmixed"] == 3
    (synthetic,) = results["oracle_ranker"]
    assert synthetic["setting"] == "synthetic" and synthetic["questions"] == 3 and synthetic["candidates"] == 50
    assert 0.0 <= synthetic["oracle"]["f1"] <= 1.0
    assert results["command"].startswith("python -m agents.experiments.signatures --model tiny")
    assert (out / "results.md").read_text().startswith("`python -m agents.experiments.signatures")


def answer_with_what_was_shown(context: str, sample: int) -> str:
    """Searches the question, then answers with the whole text of what the search showed: the answer then
    covers a gold answer (cover-EM 1) exactly when a shown document holds one."""
    episode = context.split("Question:", 1)[1]  # the instruction names the tags too
    if "<information>" not in episode:
        return f"<search>{episode.split(chr(10), 1)[0].strip()}</search>"
    shown = episode.rsplit("<information>", 1)[1].split("</information>", 1)[0]
    return f"<answer>{shown}</answer>"


def scripted_gain(first):
    from agents.experiments.signatures import Setting, oracle_ranker_gain
    from tests.agents.conftest import ScriptedPolicy

    from agents.models import TinyModelConfig, build_tiny_model

    policy = ScriptedPolicy(build_tiny_model(TinyModelConfig(seed=0))[1], answer_with_what_was_shown)
    # A pool of 5, where the retriever's first document often misses the answer a lower one holds; the whole
    # shown document fits in the answer.
    setting = Setting(candidates=5, max_turn_tokens=4096, max_response_tokens=8192)
    return oracle_ranker_gain(policy, first, setting, len(first.records), "test")


def check_scripted_gain(result):
    r, o = result["retriever"], result["oracle"]
    assert r["searches"] == o["searches"] == result["questions"]  # one search per episode
    assert r["cover_em"] == pytest.approx(r["answer_shown"]) and o["cover_em"] == pytest.approx(o["answer_shown"])
    # Same pools (same query, same retriever); the oracle shows an answer-bearing document whenever one is there.
    assert o["answer_in_pool"] == pytest.approx(r["answer_in_pool"]) == pytest.approx(o["answer_shown"])
    assert o["answer_shown"] > r["answer_shown"]


def test_oracle_ranker_gain_on_the_synthetic_world():
    first = gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=(1,), split="test", num_questions=8, cache_dir=False).unwrapped
    check_scripted_gain(scripted_gain(first))


@pytest.mark.shared_data
def test_command_runs_every_analysis_on_hotpotqa_too(tmp_path, capsys):
    out = tmp_path / "sig"
    hotpotqa = str(shared_file("hotpotqa/hotpot_train_sample_official.json"))
    assert main(["--model", "tiny", "--questions", "2", "--group", "2", "--entities", "300", "--threads", "1",
                 "--hotpotqa", hotpotqa, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "CW-GRPO, HotpotQA" in printed and "CW-GRPO, synthetic" in printed
    results = json.loads((out / "results.json").read_text())
    assert [g["setting"] for g in results["sampled"]] == [g["setting"] for g in results["oracle_ranker"]] == ["synthetic", "HotpotQA"]
    hotpot = results["sampled"][1]
    assert hotpot["questions"] == 2 and hotpot["entity_contrast"]["questions"] == 2
    assert 0.0 <= hotpot["sampled_em"] <= 1.0


@pytest.mark.shared_data
def test_oracle_ranker_gain_on_hotpotqa():
    first = gym.make("SearchQA-HotpotQA-v0", data_path=str(shared_file("hotpotqa/hotpot_train_sample_official.json")), limit=30,
                     cache_dir=False).unwrapped
    check_scripted_gain(scripted_gain(first))
