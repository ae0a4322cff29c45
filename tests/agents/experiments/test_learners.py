"""The learners comparison (`python -m agents.experiments.learners`): the pipeline on a tiny model, and the
learning check's arithmetic on literal numbers."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace

import pytest
import torch

from agents.experiments import credit, learners, merge, presets, resume, runner
from agents.experiments import report as learner_report
from searchgym.errors import ConfigError


def _seed(base: float, start: float, **final: float) -> dict:
    out = {"base": {"eval": {"eval/em": base}}, "start": {"eval": {"eval/em": start}}}
    out.update({name: {"eval": {"eval/em": em}} for name, em in final.items()})
    return out


def _row(table: str, name: str) -> list[str]:
    line = next(row for row in table.splitlines() if row.startswith(f"| {name} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_learning_check_noise_is_the_std_over_seeds():
    per_seed = {0: _seed(0.0, 0.25, grpo=0.5, **{"e-grpo": 0.25}), 1: _seed(0.0, 0.35, grpo=0.3, **{"e-grpo": 0.45})}
    table = learner_report.learning_check(per_seed, ["grpo", "e-grpo"], eval_questions=20)
    assert "std over 2 seeds" in table
    # grpo: EM 0.5, 0.3 -> mean 0.4, sample std 0.1414 (SE 0.1); base 0, 0 (std 0); start 0.25, 0.35 -> mean 0.3,
    # std 0.0707 (SE 0.05). Over base: 0.4 > 2 x 0.1; over start: 0.1 < 2 x sqrt(0.1^2 + 0.05^2) = 0.224.
    assert _row(table, "grpo") == ["grpo", "0.500, 0.300", "0.400", "0.141", "+0.400", "yes", "+0.100", "no"]
    # e-grpo: EM 0.25, 0.45 -> mean 0.35, std 0.1414: +0.05 over start is within the noise.
    assert _row(table, "e-grpo") == ["e-grpo", "0.250, 0.450", "0.350", "0.141", "+0.350", "yes", "+0.050", "no"]
    assert _row(table, "start")[:6] == ["start", "0.250, 0.350", "0.300", "0.071", "+0.300", "yes"]


def test_learning_check_with_one_seed_uses_the_binomial_standard_error():
    table = learner_report.learning_check({3: _seed(0.0, 0.5, grpo=0.75)}, ["grpo"], eval_questions=16)
    assert "binomial SE on 16 questions" in table
    # SE(0.75, n=16) = sqrt(0.75 * 0.25 / 16) = 0.108, SE(0.5) = 0.125: +0.25 is below 2 x sqrt(0.108^2 + 0.125^2)
    # = 0.331, so not above the noise; +0.75 over the base (SE ~0) is.
    assert _row(table, "grpo") == ["grpo", "0.750", "0.750", "0.108", "+0.750", "yes", "+0.250", "no"]


def test_learning_check_without_a_base_evaluation_shows_dashes():
    per_seed = {0: {"start": {"eval": {"eval/em": 0.2}}, "grpo": {"eval": {"eval/em": 0.4}}}}
    table = learner_report.learning_check(per_seed, ["grpo"], eval_questions=100)
    assert _row(table, "start")[4:6] == ["-", "-"]
    assert _row(table, "grpo")[4:8] == ["-", "-", "+0.200", "yes"]
    assert "| base |" not in table


def _paired(start: list[float], **final: list[float]) -> dict:
    out = {"start": {"eval": {"eval/em": sum(start) / len(start)}, "eval_em": start}}
    out.update({name: {"eval": {"eval/em": sum(v) / len(v)}, "eval_em": v} for name, v in final.items()})
    return out


def test_paired_check_by_hand():
    # 8 questions. Seed 0 fixes four (+0.5), seed 1 two of the same (+0.25).
    start = [0] * 8
    per_seed = {0: _paired(start, grpo=[1, 1, 1, 1, 0, 0, 0, 0]), 1: _paired(start, grpo=[1, 1, 0, 0, 0, 0, 0, 0])}
    row = _row(learner_report.paired_check(per_seed, ["grpo"]), "grpo")
    # Each question's difference averaged over the seeds: [1, 1, 0.5, 0.5, 0, 0, 0, 0], mean 0.375, sample std
    # sqrt(1.375 / 7) = 0.4432, SE 0.4432 / sqrt(8) = 0.157. Per-seed means 0.5, 0.25: std 0.1768, SE 0.125.
    # The larger SE is 0.157 and 0.375 > 2 * 0.157 = 0.313.
    assert row == ["grpo", "+0.500, +0.250", "+0.375", "0.157", "0.125", "yes", "4/0, 2/0"]
    # Seed 1 fixes nothing: by question [0.5] * 4 + [0] * 4, SE 0.0945; per-seed means 0.5, 0: SE 0.25, and
    # 0.25 is under twice it. The seeds disagree: training noise.
    per_seed[1]["grpo"]["eval_em"] = start
    assert _row(learner_report.paired_check(per_seed, ["grpo"]), "grpo")[2:] == ["+0.250", "0.094", "0.250", "no", "4/0, 0/0"]


def test_paired_check_calls_a_consistent_rise_beyond_noise_and_a_fall_worse():
    start = [0.0] * 40
    better = [1.0] * 10 + [0.0] * 30  # +0.25 on every seed, on the same questions
    assert _row(learner_report.paired_check({s: _paired(start, grpo=better) for s in range(3)}, ["grpo"]), "grpo")[5] == "yes"
    # The same EM as the start on other questions: the differences cancel. By question (the same on every seed):
    # 10 of +1, 10 of -1, 20 zeros: std sqrt(20 / 39) = 0.716, SE 0.716 / sqrt(40) = 0.113. Three seeds
    # repeating the same questions do not shrink it.
    swapped = {s: _paired(better, grpo=better[::-1]) for s in range(3)}
    # ... though 10 questions went up and 10 down on every seed.
    assert _row(learner_report.paired_check(swapped, ["grpo"]), "grpo")[2:] == ["+0.000", "0.113", "0.000", "no", "10/10, 10/10, 10/10"]
    assert _row(learner_report.paired_check({s: _paired(better, grpo=start) for s in range(3)}, ["grpo"]), "grpo")[5] == "worse"


def test_paired_check_on_avg_at_k_pairs_each_questions_sample_mean():
    per_seed = {0: _paired([0, 0, 1, 1], grpo=[0, 0, 1, 1])}
    per_seed[0]["start"]["eval_avg_em"] = [0.0, 0.25, 0.5, 1.0]
    per_seed[0]["grpo"]["eval_avg_em"] = [0.5, 0.25, 0.75, 1.0]
    # Greedy: no change. Samples: +0.5, 0, +0.25, 0 -> mean +0.1875; std 0.2394, SE 0.1197: within noise.
    assert _row(learner_report.paired_check(per_seed, ["grpo"]), "grpo")[2] == "+0.000"
    table = learner_report.paired_check(per_seed, ["grpo"], key="eval_avg_em")
    assert "Avg@k EM - start per seed (0)" in table
    assert _row(table, "grpo")[1:] == ["+0.188", "+0.188", "0.120", "-", "no", "2/0"]
    del per_seed[0]["grpo"]["eval_avg_em"]
    assert learner_report.paired_check(per_seed, ["grpo"], key="eval_avg_em") is None


def test_paired_sections_pair_rl_learners_against_grpo_and_the_supervised_control():
    start = [0, 0, 0, 0]
    per_seed = {0: _paired(start, grpo=[1, 0, 0, 0], **{"e-grpo": [1, 1, 0, 0], "sft": [1, 1, 1, 0]})}
    text = learner_report.paired_sections(per_seed, ["grpo", "e-grpo", "sft"])
    titles = [line for line in text.splitlines() if line.startswith("Paired")]
    assert [t.split(" (")[0] for t in titles] == ["Paired against the cold start", "Paired against GRPO",
                                                  "Paired against the supervised control"]
    by_title = dict(zip(titles, text.split("\n\n")[2::2]))
    against_grpo, against_sft = by_title[titles[1]], by_title[titles[2]]
    assert "| sft |" not in against_grpo  # the control changes no reward or loss setting of GRPO's
    assert _row(against_grpo, "e-grpo")[1] == "+0.250"
    # Against the control: GRPO -0.5 (2 questions down), E-GRPO -0.25 (1 down).
    assert _row(against_sft, "grpo")[1] == "-0.500" and _row(against_sft, "grpo")[-1] == "0/2"
    assert _row(against_sft, "e-grpo")[1] == "-0.250" and "| sft |" not in against_sft
    assert _row(by_title[titles[0]], "sft")[1] == "+0.750"
    # Without the control, or without GRPO, their sections are left out; without Avg@k samples, that one.
    assert "supervised control" not in learner_report.paired_sections(per_seed, ["grpo", "e-grpo"])
    assert "against GRPO" not in learner_report.paired_sections(per_seed, ["e-grpo", "sft"])
    assert "Avg@" not in text


def test_paired_check_needs_per_question_results():
    assert learner_report.paired_check({0: _seed(0.0, 0.5, grpo=0.75)}, ["grpo"]) is None


def test_signal_table_shows_each_learners_own_signals():
    results = {"grpo": {"signals": {"signal/zero_advantage_groups": 0.5}},
               "cw-grpo": {"signals": {"signal/zero_advantage_groups": 0.25, "cw_grpo/adv_contributing": 1.5}}}
    table = learner_report.signal_table(results, ["grpo", "cw-grpo"])
    assert _row(table, "grpo") == ["grpo", "0.50", "-"]
    assert _row(table, "cw-grpo") == ["cw-grpo", "0.25", "1.50"]
    assert runner.mean_signals([{"signal/zero_advantage_groups": 1.0}, {"signal/zero_advantage_groups": 0.0, "loss/policy": 3.0}]) == \
        {"signal/zero_advantage_groups": 0.5}


@pytest.mark.slow
def test_tiny_preset_runs_every_learner_over_two_seeds(tmp_path):
    assert learners.main(["--preset", "tiny", "--seeds", "0", "1", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["seeds"] == [0, 1]
    for seed in ("0", "1"):
        results = saved["results"][seed]
        assert set(results) >= {"base", "start", "grpo", "cw-grpo", "e-grpo", "cosearch"}
        for name in ("grpo", "cw-grpo", "e-grpo", "cosearch"):
            assert len(results[name]["history"]) == 1  # the preset's one RL step
            assert results[name]["eval"]["eval/questions"] == 4.0
        assert "ranker/calls" in results["cosearch"]["history"][0]  # COSEARCH trained its ranker
        assert "cw_grpo/contributing_round_share" in results["cw-grpo"]["history"][0]
        # the credit view: the preset's 2 questions x 2 rollouts, every view learner's advantages on them, and
        # COSEARCH's ranker calls of its last step (as many as its metrics counted)
        view = results["credit"]
        assert len(view["rollouts"]) == 4 and set(view["learners"]) == set(credit.VIEW_LEARNERS)
        assert all(len(view["learners"][n]["rounds"]) == 4 for n in credit.VIEW_LEARNERS)
        assert view["training_steps"] == [{"step": 1, "hops": [1, 1]}]  # 1 step of 2 one-hop questions
        assert len(view["ranker"]["calls"]) == results["cosearch"]["history"][-1]["ranker/calls"]
    report = (tmp_path / "results.md").read_text()
    assert "std over 2 seeds" in report and "| cosearch |" in report
    assert "Credit view: one batch of 2 questions x 2 rollouts" in report and "| CW-GRPO |" in report
    for name in ("curves.png", "credit.png", "seed1/credit.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "seed1" / "curves.png").exists()


@pytest.mark.slow
def test_shared_start_trains_every_seed_from_one_cold_start(tmp_path, monkeypatch):
    monkeypatch.setitem(presets.PRESETS, "tiny-shared", replace(presets.PRESETS["tiny"], world_seed=0, shared_start=True, eval_base=False))
    assert learners.main(["--preset", "tiny-shared", "--learners", "grpo", "--seeds", "0", "1", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    assert results["0"]["start"] == results["1"]["start"]  # one start policy, evaluated once
    assert results["0"]["fingerprint"] == results["1"]["fingerprint"]  # one world, the same questions
    assert "base" not in results["0"] and not (tmp_path / "seed1" / "cold_start").exists()
    assert len(results["1"]["grpo"]["eval_em"]) == 4
    assert "Paired against the cold start" in (tmp_path / "results.md").read_text()


def test_shared_start_needs_a_fixed_world():
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="world_seed"):
        replace(presets.PRESETS["tiny"], shared_start=True)


@pytest.mark.slow
def test_seeds_run_apart_from_a_shared_start_merge_into_one_check(tmp_path, monkeypatch):
    from searchgym.errors import ConfigError

    monkeypatch.setitem(presets.PRESETS, "tiny-shared", replace(presets.PRESETS["tiny"], world_seed=0, shared_start=True, eval_base=False))
    run = ["--preset", "tiny-shared", "--learners", "grpo"]
    assert learners.main([*run, "--seeds", "0", "--out", str(tmp_path / "a")]) == 0
    start = tmp_path / "a" / "seed0" / "cold_start" / "model"
    # Seed 1 in another process, from the first run's start policy, which it does not evaluate again.
    assert learners.main([*run, "--seeds", "1", "--start-model", str(start), "--out", str(tmp_path / "b")]) == 0
    alone = json.loads((tmp_path / "b" / "results.json").read_text())["results"]["1"]
    assert "eval" not in alone["start"] and len(alone["grpo"]["eval_em"]) == 4
    assert learners.main(["--merge", str(tmp_path / "a" / "results.json"), str(tmp_path / "b" / "results.json"),
                          "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "results.json").read_text())
    assert merged["seeds"] == [0, 1] and merged["results"]["1"]["start"] == merged["results"]["0"]["start"]
    assert "| grpo | " in (tmp_path / "m" / "results.md").read_text()
    # The second run alone cannot be paired: nobody evaluated its start.
    with pytest.raises(ConfigError, match="no merged run evaluated"):
        learners.main(["--merge", str(tmp_path / "b" / "results.json"), "--out", str(tmp_path / "x")])
    with pytest.raises(ConfigError, match="seed 0 is in two"):
        learners.main(["--merge", str(tmp_path / "a" / "results.json"), str(tmp_path / "a" / "results.json"), "--out", str(tmp_path / "y")])
    # Another RL setting from the same start, paired at once against the evaluation of the run that made it.
    assert learners.main([*run, "--seeds", "2", "--lr", "5e-5", "--questions", "1", "--temperature", "0.7", "--start-model", str(start),
                          "--start-results", str(tmp_path / "a" / "results.json"), "--out", str(tmp_path / "c")]) == 0
    other = json.loads((tmp_path / "c" / "results.json").read_text())
    assert other["preset"]["lr"] == 5e-5 and other["preset"]["questions"] == 1 and other["preset"]["temperature"] == 0.7
    assert other["results"]["2"]["start"] == merged["results"]["0"]["start"]
    assert "Paired against the cold start" in (tmp_path / "c" / "results.md").read_text()
    with pytest.raises(ConfigError, match="no seed there made and evaluated"):
        learners.main([*run, "--seeds", "3", "--start-model", str(start), "--start-results", str(tmp_path / "b" / "results.json"),
                       "--out", str(tmp_path / "d")])
    with pytest.raises(ConfigError, match="give both"):
        learners.main([*run, "--seeds", "3", "--start-results", str(tmp_path / "a" / "results.json"), "--out", str(tmp_path / "d")])


def test_the_start_policy_is_evaluated_again_and_its_entry_replaces_the_copies_in_a_merge(tmp_path, monkeypatch, capsys):
    """`reevaluate --learner start` evaluates the start policy from its folder behind the retriever: it scores what
    the run that made it did on every question; with --update-results that run's entry (and start.json) holds it,
    and a merge takes it over the copy a learner's run took before, whichever comes first."""
    from agents.experiments import reevaluate, without_ranker

    monkeypatch.setitem(presets.PRESETS, "tiny-shared", replace(presets.PRESETS["tiny"], world_seed=0, shared_start=True, eval_base=False))
    start_run, learner_run = tmp_path / "start", tmp_path / "grpo"
    assert learners.main(["--preset", "tiny-shared", "--start-only", "--out", str(start_run)]) == 0
    with pytest.raises(SystemExit):  # no learner in it: the start is named
        reevaluate.main([str(start_run)])
    assert "--learner start evaluates its start policy" in capsys.readouterr().err
    model = start_run / "seed0" / "cold_start" / "model"
    assert learners.main(["--preset", "tiny-shared", "--learners", "grpo", "--seeds", "0", "--start-model", str(model),
                          "--start-results", str(start_run / "results.json"), "--out", str(learner_run)]) == 0
    made = json.loads((start_run / "results.json").read_text())["results"]["0"]["start"]
    # Every learner's training steps in an env with a judge log their rollouts' non-contributing searches.
    steps = json.loads((learner_run / "results.json").read_text())["results"]["0"]["grpo"]["history"]
    assert all(step["rollout/noncontributing_searches_mean"] <= step["rollout/searches_mean"] for step in steps)
    # The learner's run took a copy of the start's entry; one made before the counts were kept lacks them.
    copied = json.loads((learner_run / "results.json").read_text())
    assert copied["results"]["0"]["start"] == made and "eval_contributing" in made
    del copied["results"]["0"]["start"]["eval_contributing"]
    (learner_run / "results.json").write_text(json.dumps(copied))

    again = reevaluate.reevaluate(start_run, "start", update_results=True)
    assert again["loaded"] == ["policy"] and again["eval_em"] == made["eval_em"] and again["eval_contributing"] == made["eval_contributing"]
    assert set(again["paired"]) == {"re-evaluated - run's evaluation"} and again["paired"]["re-evaluated - run's evaluation"]["mean"] == 0
    assert (start_run / "seed0" / "cold_start" / "reevaluated.json").is_file()
    with pytest.raises(ConfigError, match="behind the retriever already"):  # no ranker to leave out
        without_ranker.evaluate_without_ranker(start_run, "start")
    entry = json.loads((start_run / "results.json").read_text())["results"]["0"]["start"]
    assert entry["reevaluated"]["superseded"]["eval_em"] == made["eval_em"] and entry["model"] == made["model"]
    assert json.loads((start_run / "seed0" / "cold_start" / "start.json").read_text())["start"] == entry  # what --resume reads

    for order in ([start_run, learner_run], [learner_run, start_run]):
        _, per_seed = merge.merge_results([d / "results.json" for d in order])
        assert per_seed[0]["start"] == entry and "grpo" in per_seed[0]
    # With the counts on both sides the report pairs the learner's non-contributing searches against the start's.
    assert learners.main(["--merge", str(learner_run / "results.json"), str(start_run / "results.json"), "--out", str(tmp_path / "m")]) == 0
    assert "not contributing, per episode, against the cold start" in (tmp_path / "m" / "results.md").read_text()

    # A start policy whose folder is gone: the reason.
    moved = tmp_path / "moved"
    model.rename(moved)
    with pytest.raises(ConfigError, match="is not there"):
        reevaluate.reevaluate(start_run, "start")


@pytest.mark.slow
def test_learners_side_by_side_in_processes_match_one_after_another(tmp_path):
    """Two learner processes (one thread each) give what one process gives training them in turn: a learner's
    result does not depend on which learner ran before it, or where."""
    run = ["--preset", "tiny", "--learners", "grpo", "e-grpo", "--threads", "1"]
    assert learners.main([*run, "--workers", "1", "--out", str(tmp_path / "one")]) == 0
    assert learners.main([*run, "--workers", "2", "--out", str(tmp_path / "two")]) == 0
    one, two = (json.loads((tmp_path / d / "results.json").read_text())["results"]["0"] for d in ("one", "two"))
    assert one["fingerprint"] == two["fingerprint"]
    for name in ("grpo", "e-grpo"):
        assert one[name]["eval_em"] == two[name]["eval_em"]
        assert one[name]["peak_rss_gb"] > 0 and two[name]["peak_rss_gb"] > 0  # each learner's process's peak, reported
        # A learner's own process asks before its first tensor: huge pages there exactly when the run asked for them.
        assert two[name]["huge_pages"] is (os.environ.get("THP_MEM_ALLOC_ENABLE") == "1")
        for a, b in zip(one[name]["history"], two[name]["history"], strict=True):
            assert a["rollout/sampled_tokens"] == b["rollout/sampled_tokens"]
            assert a["loss/grad_norm"] == pytest.approx(b["loss/grad_norm"], rel=1e-5, abs=1e-7)


def test_the_rollout_temperature_is_part_of_the_setting(tmp_path):
    from searchgym.errors import ConfigError

    preset = replace(presets.PRESETS["tiny"], world_seed=0, shared_start=True)
    assert runner.train_config(replace(preset, temperature=0.7), 1, 0, tmp_path, {}, 1, "grpo", "tiny", "grpo").rollout.temperature == 0.7
    assert runner.train_config(preset, 1, 0, tmp_path, {}, 1, "grpo", "tiny", "grpo").rollout.temperature == 1.0
    # A start whose Avg@4 was sampled at 1.0 (a run written before the field existed) pairs with greedy runs at
    # any temperature, and with Avg@k runs only at its own.
    start = {"model": str(tmp_path / "start"), "eval": {"eval/em": 0.5}, "eval_em": [1.0, 0.0], "eval_avg_em": [0.75, 0.0]}
    run = {"preset": {"lr": 1e-5}, "results": {"0": {"start": start, "fingerprint": {"env_id": "x"}}}}
    (tmp_path / "results.json").write_text(json.dumps(run))
    made = merge.start_evaluation(tmp_path / "results.json", tmp_path / "start", eval_samples=4, temperature=1.0)
    assert made["start"]["eval_avg_em"] == [0.75, 0.0]
    assert merge.start_evaluation(tmp_path / "results.json", tmp_path / "start", eval_samples=0, temperature=0.7)["start"] == start
    with pytest.raises(ConfigError, match="sampled at temperature 1, this run samples at 0.7"):
        merge.start_evaluation(tmp_path / "results.json", tmp_path / "start", eval_samples=4, temperature=0.7)
    # Runs at two temperatures do not merge into one report.
    seed = {"start": start, "fingerprint": {"env_id": "x"}, "grpo": {"eval_em": [1.0, 1.0]}}
    for name, t in (("a", 1.0), ("b", 0.7)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"preset": {**asdict(preset), "temperature": t}, "steps": 1, "seeds": [0],
                                                            "results": {"0" if name == "a" else "1": seed}}))
    with pytest.raises(ConfigError, match="another preset"):
        merge.merge_results([tmp_path / "a.json", tmp_path / "b.json"])


def test_workers_must_be_positive():
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="workers"):
        replace(presets.PRESETS["tiny"], workers=0)


def test_fingerprint_differences_leave_the_learners_own_options_aside():
    start = {"env_id": "SearchQA-Synthetic-v0", "make": {"hops": [2], "split": "test"}, "eval_questions": 200,
             "setting": {"ranker": {"name": "retriever"}, "corpus": {"sha256": "abc"}}}
    cosearch = {**start, "make": {**start["make"], "ranker": "model", "judge": "gold"},
                "setting": {**start["setting"], "ranker": {"name": "model", "k": 5}}}
    assert runner.fingerprint_differences(cosearch, start, {"ranker", "judge"}) == []
    assert runner.fingerprint_differences(cosearch, start) == ["make.judge", "make.ranker", "setting.ranker.k", "setting.ranker.name"]
    other = {**cosearch, "make": {**cosearch["make"], "hops": [1]}, "eval_questions": 20,
             "setting": {**cosearch["setting"], "corpus": {"sha256": "def"}}}
    assert runner.fingerprint_differences(other, start, {"ranker", "judge"}) == ["eval_questions", "make.hops", "setting.corpus.sha256"]


@pytest.mark.slow
def test_an_interrupted_run_resumes_to_what_an_uninterrupted_one_gives(tmp_path, monkeypatch):
    from agents.train.trainer import Trainer
    from searchgym.errors import ConfigError

    run = ["--preset", "tiny", "--learners", "grpo", "e-grpo", "--steps", "2", "--resume"]
    assert learners.main([*run, "--keep-optimizer-states", "--out", str(tmp_path / "whole")]) == 0

    # The same command, stopped in e-grpo's second RL step (grpo finished, e-grpo checkpointed after step 1).
    step = Trainer.train_step
    calls = []

    def stopping(self):
        calls.append(self.config.learner_name)
        if calls.count("e-grpo") == 2:
            raise KeyboardInterrupt
        return step(self)

    monkeypatch.setattr(Trainer, "train_step", stopping)
    with pytest.raises(KeyboardInterrupt):
        learners.main([*run, "--out", str(tmp_path / "cut")])
    assert calls == ["grpo", "grpo", "e-grpo", "e-grpo"]
    assert (tmp_path / "cut" / "seed0" / "grpo" / "result.json").is_file()
    assert not (tmp_path / "cut" / "seed0" / "e-grpo" / "result.json").exists()

    # Rerun: the start policy and grpo are read back, e-grpo trains its second step only.
    calls.clear()
    loads = []
    monkeypatch.setattr(runner, "_cold_start", lambda trainer: loads.append("cold start"))
    assert learners.main([*run, "--out", str(tmp_path / "cut")]) == 0
    assert calls == ["e-grpo"] and loads == []

    whole, cut = (json.loads((tmp_path / d / "results.json").read_text())["results"]["0"] for d in ("whole", "cut"))
    assert cut["start"]["eval_em"] == whole["start"]["eval_em"] and cut["fingerprint"] == whole["fingerprint"]
    for name in ("grpo", "e-grpo"):
        assert cut[name]["eval_em"] == whole[name]["eval_em"]
        assert [m["step"] for m in cut[name]["history"]] == [1, 2]
        for a, b in zip(whole[name]["history"], cut[name]["history"], strict=True):
            assert a["rollout/sampled_tokens"] == b["rollout/sampled_tokens"]
            for key in ("loss/policy", "loss/grad_norm", "rollout/reward"):
                assert b[key] == pytest.approx(a[key], rel=1e-6, abs=1e-9), (name, key)
    # The resumed learner's minutes count the step its first process finished; its entry says it was resumed.
    assert cut["e-grpo"]["resumed_from_step"] == 1 and "resumed_from_step" not in cut["grpo"] and "resumed_from_step" not in whole["e-grpo"]
    assert cut["e-grpo"]["minutes"] * 60 > cut["e-grpo"]["history"][0]["time/step_s"] > 0
    assert "(resumed at step 1)" in (tmp_path / "cut" / "results.md").read_text()
    # A finished learner keeps its final checkpoint only, and that without its optimizer states unless asked
    # (--keep-optimizer-states, which changes no result).
    assert [p.name for p in (tmp_path / "cut" / "seed0" / "e-grpo" / "checkpoints").iterdir() if p.name.startswith("step")] == ["step-000002"]
    for name in ("grpo", "e-grpo"):
        cut_final, whole_final = (tmp_path / d / "seed0" / name / "checkpoints" / "step-000002" for d in ("cut", "whole"))
        assert (cut_final / "policy.safetensors").is_file() and not list(cut_final.glob("*.optim.pt"))
        assert (whole_final / "policy.optim.pt").is_file()

    # Another setting in the same folder is refused, naming what differs: an RL setting by the first learner
    # (the start policy does not depend on it), a cold-start setting by the start policy.
    with pytest.raises(ConfigError, match=r"\[grpo\] --resume .* \(optim.lr differ\)"):
        learners.main([*run, "--lr", "3e-4", "--out", str(tmp_path / "cut")])
    with pytest.raises(ConfigError, match=r"\[start policy\] --resume .* \(eval_questions differ\)"):
        learners.main([*run, "--eval-questions", "3", "--out", str(tmp_path / "cut")])


def test_learner_options_are_parsed_and_checked_against_the_learners_config():
    import math

    from searchgym.errors import ConfigError

    got = presets.parse_learner_options(["cw-grpo.kl_coef=0", "cw-grpo.alpha=inf", "e-grpo.entity_match=normalized"])
    assert got == {"cw-grpo": {"kl_coef": 0, "alpha": math.inf}, "e-grpo": {"entity_match": "normalized"}}
    assert presets.parse_learner_options(["grpo.kl_coef=0.5"], {"grpo": {"eps_high": 0.2}}) == {"grpo": {"eps_high": 0.2, "kl_coef": 0.5}}
    for bad, message in (("cw-grpo.kl_coef", "LEARNER.OPTION=VALUE"), ("kl_coef=0", "LEARNER.OPTION=VALUE"),
                         ("ppo.kl_coef=0", "no learner 'ppo'"), ("e-grpo.beta=1", "has no option 'beta'"),
                         ("cw-grpo.alpha=-1", "alpha must be >= 0")):
        with pytest.raises(ConfigError, match=message):
            presets.parse_learner_options([bad])


def test_a_learner_option_reaches_the_learner_and_not_the_cold_start(tmp_path):
    preset = replace(presets.PRESETS["tiny"], learner_options={"grpo": {"kl_coef": 0.25}})
    config = runner.train_config(preset, 1, 0, tmp_path, {}, 1, "grpo", "tiny", "grpo")
    assert config.learner.kl_coef == 0.25
    cold = runner.train_config(preset, 1, 0, tmp_path, {}, 1, "grpo", "tiny", "cold_start", cold_start_steps=1)
    assert cold.learner.kl_coef == 0.0  # GRPO's default: KL-free


def _run_file(tmp_path, name, seeds, options=None, start="start-model", fingerprint="world-0", **final):
    """A results.json of learners trained apart from one evaluated start: `final` maps a learner to its per-seed
    per-question EMs."""
    preset = asdict(replace(presets.PRESETS["tiny"], learner_options=options or {}))
    start_em = [0, 0, 1, 1]
    def evaluation(em):
        return {"eval/em": sum(em) / 4, "eval/f1": sum(em) / 4, "eval/searches": 2.0, "eval/questions": 4.0}

    results = {str(s): {"fingerprint": {"id": fingerprint}, "start": {"eval": evaluation(start_em), "eval_em": start_em, "model": str(tmp_path / start)},
                        **{n: {"eval": evaluation(em[i]), "eval_em": em[i], "history": [], "signals": {}} for n, em in final.items()}}
               for i, s in enumerate(seeds)}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"preset": preset, "steps": 1, "seeds": seeds, "results": results}))
    return path


def test_learners_trained_apart_merge_per_seed_and_pair_against_grpo(tmp_path):
    grpo = _run_file(tmp_path, "grpo", [0, 1], grpo=[[0, 0, 1, 1], [1, 0, 1, 1]])
    cw = _run_file(tmp_path, "cw", [0, 1], {"cw-grpo": {"kl_coef": 0.0}}, **{"cw-grpo": [[1, 0, 1, 1], [1, 1, 1, 1]]})
    head, per_seed = merge.merge_results([grpo, cw])
    assert set(per_seed[0]) >= {"grpo", "cw-grpo"} and head["preset"]["learner_options"] == {"cw-grpo": {"kl_coef": 0.0}}
    row = _row(learner_report.paired_check(per_seed, ["grpo", "cw-grpo"], against="grpo"), "cw-grpo")
    # Seed 0: +1 on one of 4 questions (+0.25); seed 1: +0.25. Per question over seeds: 0.5, 0.5, 0, 0.
    assert row[:3] == ["cw-grpo", "+0.250, +0.250", "+0.250"]
    assert row[3] == "0.144"  # std(0.5, 0.5, 0, 0) / 2
    (tmp_path / "out").mkdir()
    report = learner_report.write_report(per_seed, ["grpo", "cw-grpo"], head["preset"], 1, tmp_path / "out")
    assert "Paired against GRPO" in report and "cw-grpo: kl_coef=0.0" in report


def test_a_learner_missing_from_a_merged_seed_is_named_in_the_report_not_dropped_silently(tmp_path, capsys):
    """A merge made while seeds are still running: GRPO on seeds 1 and 2, COSEARCH on seed 1 only. The report
    pairs learners over every merged seed, so COSEARCH is left out of it, and the report and the output say so
    with the seeds it has; merging seed 1's runs alone reports it."""
    grpo = _run_file(tmp_path, "grpo", [1, 2], grpo=[[0, 0, 1, 1], [1, 0, 1, 1]])
    cos = _run_file(tmp_path, "cos", [1], cosearch=[[1, 0, 1, 1]])
    _, per_seed = merge.merge_results([cos, grpo])
    assert merge.merged_learners(per_seed) == ["grpo"]
    note = merge.left_out(per_seed)
    assert "cosearch (trained on seed 1 only)" in note and "(1, 2)" in note and "grpo (" not in note
    assert learners.main(["--merge", str(cos), str(grpo), "--out", str(tmp_path / "m")]) == 0
    assert note in (tmp_path / "m" / "results.md").read_text() and note in capsys.readouterr().out
    grpo_seed1 = _run_file(tmp_path, "grpo1", [1], grpo=[[0, 0, 1, 1]])
    _, per_seed = merge.merge_results([cos, grpo_seed1])
    assert merge.merged_learners(per_seed) == ["grpo", "cosearch"] and merge.left_out(per_seed) is None


def test_a_start_only_run_merges_with_learners_of_other_seeds_and_leaves_the_report(tmp_path):
    """`--start-only` keeps seed 0; learners run from its policy on seed 2 alone still make a report, paired
    against that start's evaluation (a seed with no learner used to empty the report's learner list)."""
    start = _run_file(tmp_path, "start", [0])
    run = json.loads(start.read_text())
    run["results"]["0"]["start"]["eval_em"] = [1, 0, 1, 1]  # evaluated again: the learners' copies are older
    run["results"]["0"]["start"]["reevaluated"] = {"superseded": {"eval_em": [0, 0, 1, 1]}}
    start.write_text(json.dumps(run))
    grpo = _run_file(tmp_path, "grpo", [2], grpo=[[0, 0, 1, 1]])
    cw = _run_file(tmp_path, "cw", [2], **{"cw-grpo": [[1, 1, 1, 1]]})
    head, per_seed = merge.merge_results([start, grpo, cw])
    assert sorted(per_seed) == [2] and set(per_seed[2]) >= {"grpo", "cw-grpo"}
    assert per_seed[2]["start"]["eval_em"] == [1, 0, 1, 1]
    (tmp_path / "out").mkdir()
    report = learner_report.write_report(per_seed, ["grpo", "cw-grpo"], head["preset"], 1, tmp_path / "out")
    assert "Paired against GRPO" in report and "cw-grpo" in report
    # The start alone still merges into a report of its own evaluation.
    assert sorted(merge.merge_results([start])[1]) == [0]


def test_merges_that_would_mix_two_settings_of_a_learner_are_refused(tmp_path):
    from searchgym.errors import ConfigError

    plain = _run_file(tmp_path, "plain", [0], **{"cw-grpo": [[0, 0, 1, 1]]})
    no_kl = _run_file(tmp_path, "nokl", [1], {"cw-grpo": {"kl_coef": 0.0}}, **{"cw-grpo": [[0, 1, 1, 1]]})
    with pytest.raises(ConfigError, match="cw-grpo ran with options"):
        merge.merge_results([plain, no_kl])
    twice = _run_file(tmp_path, "twice", [0], **{"cw-grpo": [[1, 1, 1, 1]]})
    with pytest.raises(ConfigError, match="seed 0 is in two of the runs to merge, with cw-grpo in both"):
        merge.merge_results([plain, twice])
    other_start = _run_file(tmp_path, "other", [0], start="another-start", grpo=[[1, 1, 1, 1]])
    with pytest.raises(ConfigError, match="another policy"):
        merge.merge_results([plain, other_start])


def test_memory_settings_reach_both_updates_and_do_not_split_a_setting(tmp_path):
    """--micro-batch, --gradient-checkpointing and --malloc-mmap-threshold change how the update holds memory, not
    its gradient (tested in test_update and test_memory): the run's config carries them, yet a run with them
    merges with, and resumes, one without."""
    from agents.memory import MMAP_THRESHOLD
    from searchgym.errors import ConfigError

    preset = replace(presets.PRESETS["tiny"], micro_batch=1, gradient_checkpointing=True, malloc_mmap_threshold=0)
    config = runner.train_config(preset, 1, 0, tmp_path, {}, 1, "cosearch", "tiny", "cosearch")
    assert config.optim.micro_batch == 1 and config.optim.gradient_checkpointing and config.malloc_mmap_threshold is None
    plain = runner.train_config(presets.PRESETS["tiny"], 1, 0, tmp_path, {}, 1, "cosearch", "tiny", "cosearch")
    assert plain.optim.micro_batch == 4 and not plain.optim.gradient_checkpointing and plain.malloc_mmap_threshold == MMAP_THRESHOLD
    assert resume.run_setting(config) == resume.run_setting(plain)
    assert resume.run_setting(replace(plain, optim=replace(plain.optim, lr=1.0))) != resume.run_setting(plain)

    a = _run_file(tmp_path, "a", [0], grpo=[[0, 0, 1, 1]])
    b = _run_file(tmp_path, "b", [1], grpo=[[0, 1, 1, 1]])
    run = json.loads(b.read_text())
    run["preset"].update(micro_batch=1, gradient_checkpointing=True, malloc_mmap_threshold=0)
    b.write_text(json.dumps(run))
    _, per_seed = merge.merge_results([a, b])
    assert sorted(per_seed) == [0, 1]
    run["preset"]["max_batch_rows"] = 8  # not a memory setting of the update: refused as before
    b.write_text(json.dumps(run))
    with pytest.raises(ConfigError, match="another preset"):
        merge.merge_results([a, b])
    with pytest.raises(ConfigError, match="micro_batch must be >= 1"):
        replace(presets.PRESETS["tiny"], micro_batch=0)
    with pytest.raises(ConfigError, match="malloc_mmap_threshold must be 0"):
        replace(presets.PRESETS["tiny"], malloc_mmap_threshold=100)


def test_the_supervised_control_continues_the_cold_start_for_as_many_steps_as_rl(tmp_path, monkeypatch, capsys):
    """`sft`: no RL; from the start policy, as many more cold-start steps as RL steps, on the next batches of
    the cold start's question stream, then the same evaluation as the learners."""
    import agents.train.sft as sft
    from safetensors.torch import load_file

    seen: list[int] = []
    example = sft.oracle_example
    monkeypatch.setattr(sft, "oracle_example", lambda env, tok, i: seen.append(i) or example(env, tok, i))
    out = tmp_path / "run"
    assert learners.main(["--preset", "tiny", "--learners", "grpo", "sft", "--steps", "2", "--no-eval-base", "--resume",
                          "--out", str(out)]) == 0
    tiny = presets.PRESETS["tiny"]
    from agents.train.config import OptimConfig

    batch = OptimConfig().cold_start_batch
    # The start's cold start, then the control's 2 steps: one seeded stream of 1 + 2 batches.
    assert len(seen) == (tiny.cold_start_steps + 2) * batch
    seeded = seen[:]
    seen.clear()
    whole = runner.train_config(replace(tiny, cold_start_steps=3), 2, 0, tmp_path / "x", {}, 1, "grpo", "tiny", "x", cold_start_steps=3)
    from agents.train.trainer import Trainer

    trainer = Trainer(whole)
    trainer.cold_start()
    trainer.close()
    assert seen == seeded

    result = json.loads((out / "results.json").read_text())["results"]["0"]
    control = result["sft"]
    assert [m["step"] for m in control["history"]] == [1, 2] and all(m["sft/loss"] > 0 for m in control["history"])
    assert len(control["eval_em"]) == tiny.eval_questions and control["signals"] == {}
    final = load_file(str(out / "seed0" / "sft" / "checkpoints" / "step-000000" / "policy.safetensors"))
    start = load_file(str(out / "seed0" / "cold_start" / "model" / "model.safetensors"))
    assert any(not torch.equal(final[k], start[k]) for k in start if k in final)  # it trained
    table = (out / "seed0" / "results.md").read_text()
    assert _row(table, "sft")[4] == "-"  # no training reward: it samples no rollouts
    assert "| sft |" in learner_report.paired_check({0: result}, ["grpo", "sft"], against="grpo")

    # A rerun with --resume reads the finished control back: no supervised step again.
    seen.clear()
    capsys.readouterr()
    assert learners.main(["--preset", "tiny", "--learners", "grpo", "sft", "--steps", "2", "--no-eval-base", "--resume",
                          "--out", str(out)]) == 0
    assert seen == [] and "[sft] resumed: finished by an earlier run" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="no learner 'sft' with options"):
        presets.parse_learner_options(["sft.kl_coef=0"])


def test_the_precision_reaches_every_run_and_is_recorded(tmp_path):
    """--dtype reaches the cold start's and every learner's TrainConfig, and a resume at another one is refused;
    each policy's entry and the fingerprint record the precision it computed in. Runs of two precisions do not
    merge into one report, and pair policy by policy through compare (the fingerprints' precision is
    recorded, not compared)."""
    from agents.experiments.compare import paired
    from agents.experiments.compare import learners_policy

    bf16 = replace(presets.PRESETS["tiny"], dtype="bfloat16")
    assert runner.train_config(bf16, 1, 0, tmp_path, {}, 1, "grpo", "tiny", "grpo").dtype == "bfloat16"
    plain = runner.train_config(presets.PRESETS["tiny"], 1, 0, tmp_path, {}, 1, "grpo", "tiny", "grpo")
    assert plain.dtype == "auto" and resume.run_setting(replace(plain, dtype="bfloat16")) != resume.run_setting(plain)
    with pytest.raises(ConfigError, match="dtype"):
        replace(presets.PRESETS["tiny"], dtype="half")

    assert learners.main(["--preset", "tiny", "--learners", "grpo", "--dtype", "bfloat16", "--out", str(tmp_path / "bf")]) == 0
    saved = json.loads((tmp_path / "bf" / "results.json").read_text())
    assert saved["preset"]["dtype"] == "bfloat16"
    seed = saved["results"]["0"]
    assert seed["start"]["dtype"] == seed["grpo"]["dtype"] == "bfloat16" and seed["fingerprint"]["precision"] == "bfloat16"

    fp32 = json.loads(json.dumps(saved))
    fp32["preset"]["dtype"] = "float32"
    for entry in ("start", "grpo"):
        fp32["results"]["0"][entry]["dtype"] = "float32"
    fp32["results"]["0"]["fingerprint"]["precision"] = "float32"
    fp32["results"]["0"]["grpo"]["eval_em"] = [1.0 - x for x in seed["grpo"]["eval_em"]]
    (tmp_path / "fp32.json").write_text(json.dumps(fp32))
    other = json.loads(json.dumps(fp32))
    other["results"] = {"1": other["results"].pop("0")}
    (tmp_path / "fp32-seed1.json").write_text(json.dumps(other))
    with pytest.raises(ConfigError, match="bfloat16 and float32"):
        merge.merge_results([tmp_path / "bf" / "results.json", tmp_path / "fp32-seed1.json"])
    a, b = learners_policy(saved, "grpo"), learners_policy(fp32, "grpo")
    assert a["fingerprints"]["0"]["precision"] == "bfloat16" and b["fingerprints"]["0"]["precision"] == "float32"
    table = paired(a, b)
    n = len(seed["grpo"]["eval_em"])
    difference = sum(2 * x - 1 for x in seed["grpo"]["eval_em"]) / n  # x - (1 - x) per question
    assert f"{difference:+.3f}" in table


@pytest.mark.slow
def test_a_learners_final_checkpoint_is_evaluated_again_with_and_without_its_ranker_and_paired(tmp_path, monkeypatch, capsys):
    from agents.experiments import reevaluate, without_ranker
    from searchgym.errors import ConfigError

    monkeypatch.setitem(presets.PRESETS, "tiny-shared", replace(presets.PRESETS["tiny"], world_seed=0, shared_start=True, eval_base=False))
    # --resume, as the documented runs: each learner's result.json is written too.
    assert learners.main(["--preset", "tiny-shared", "--learners", "grpo", "cosearch", "--seeds", "0", "--resume", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "results.json").read_text())["results"]["0"]
    # GRPO has no ranker: its final policy, evaluated again behind the retriever, scores what its run did on
    # every question (the same weights, env and questions), so the loaded policy is the run's last.
    grpo = without_ranker.evaluate_without_ranker(tmp_path, "grpo")
    assert grpo["eval_em"] == saved["grpo"]["eval_em"] and grpo["paired"]["without ranker - with ranker"]["mean"] == 0
    cosearch = without_ranker.evaluate_without_ranker(tmp_path, "cosearch")
    assert len(cosearch["eval_em"]) == len(saved["cosearch"]["eval_em"]) == 4
    behind_ranker = cosearch["paired"]["with ranker - start"]
    assert behind_ranker["mean"] == pytest.approx(sum(saved["cosearch"]["eval_em"]) / 4 - sum(saved["start"]["eval_em"]) / 4)
    written = json.loads((tmp_path / "seed0" / "cosearch" / "without_ranker.json").read_text())
    assert written["eval_em"] == cosearch["eval_em"] and set(written["paired"]) == {
        "without ranker - with ranker", "without ranker - start", "with ranker - start"}
    with pytest.raises(ConfigError, match="no evaluated 'e-grpo'"):
        without_ranker.evaluate_without_ranker(tmp_path, "e-grpo")
    for command in (without_ranker, reevaluate):  # a run folder that is not one: the reason, no traceback
        with pytest.raises(SystemExit) as stopped:
            command.main([str(tmp_path / "nowhere")])
        assert stopped.value.code == 2 and f"{tmp_path / 'nowhere' / 'results.json'} not found" in capsys.readouterr().err

    # Behind its own ranker again: the run evaluated with the ranker greedy, so the final checkpoint's policy and
    # ranker score what the run did on every question.
    again = reevaluate.reevaluate(tmp_path, "cosearch")
    assert again["eval_em"] == saved["cosearch"]["eval_em"] and again["loaded"][:2] == ["policy", "ranker"]
    assert again["paired"]["re-evaluated - run's evaluation"]["mean"] == 0
    assert again["paired"]["without ranker - re-evaluated"]["mean"] == pytest.approx(
        (sum(cosearch["eval_em"]) - sum(again["eval_em"])) / 4)
    assert "eval/ranker_hit@1" in again["eval"] or again["eval"].get("eval/ranker_answerable_calls", 0) == 0
    with pytest.raises(SystemExit):  # two learners in this run: which one is asked
        reevaluate.main([str(tmp_path)])
    assert "name one with --learner" in capsys.readouterr().err

    # A run made before its evaluation kept the judge's contributing searches: evaluated again, GRPO scores what
    # it did on every question, and --update-results adds what is new to its entry, the old evaluation kept.
    results_json = tmp_path / "results.json"
    old = json.loads(results_json.read_text())
    del old["results"]["0"]["grpo"]["eval_contributing"]
    results_json.write_text(json.dumps(old))
    grpo_again = reevaluate.reevaluate(tmp_path, "grpo", update_results=True)
    assert grpo_again["loaded"] == ["policy"] and grpo_again["eval_em"] == saved["grpo"]["eval_em"]
    entry = json.loads(results_json.read_text())["results"]["0"]["grpo"]
    assert entry["eval_contributing"] == saved["grpo"]["eval_contributing"] and entry["eval_em"] == saved["grpo"]["eval_em"]
    assert "eval_contributing" not in entry["reevaluated"]["superseded"] and entry["reevaluated"]["superseded"]["eval_em"] == saved["grpo"]["eval_em"]

    # The weights evaluated are the checkpoint's own, the ranker's included: one changed in the checkpoint (its
    # manifest rewritten) is the one the ranker holds when the evaluation runs, and it differs from the policy's.
    from safetensors.torch import load_file, save_file

    from agents.train.checkpoint import list_checkpoints
    from agents.train.checkpoint_checks import write_manifest

    final = list_checkpoints(tmp_path / "seed0" / "cosearch" / "checkpoints")[-1]
    ranker = load_file(str(final / "ranker.safetensors"))
    name = next(iter(ranker))
    ranker[name] = ranker[name] + 1.0
    save_file(ranker, str(final / "ranker.safetensors"))
    write_manifest(final)
    seen, evaluate = {}, runner._evaluate

    def spying(trainer, what, samples=0):
        seen.update(ranker=dict(trainer.models["ranker"].named_parameters())[name].detach().clone(),
                    policy=dict(trainer.models["policy"].named_parameters())[name].detach().clone())
        return evaluate(trainer, what, samples)

    monkeypatch.setattr(runner, "_evaluate", spying)
    changed = reevaluate.reevaluate(tmp_path, "cosearch", update_results=True)
    assert torch.equal(seen["ranker"], ranker[name]) and not torch.equal(seen["policy"], ranker[name])
    assert torch.equal(seen["policy"], load_file(str(final / "policy.safetensors"))[name])
    # --update-results: the run's entry (and its result.json) now holds this evaluation, the replaced one kept.
    entry = json.loads((tmp_path / "results.json").read_text())["results"]["0"]["cosearch"]
    assert entry["eval_em"] == changed["eval_em"] and entry["reevaluated"]["superseded"]["eval_em"] == saved["cosearch"]["eval_em"]
    done = json.loads((tmp_path / "seed0" / "cosearch" / "result.json").read_text())["entry"]
    assert done["eval"] == changed["eval"] and done["reevaluated"]["superseded"]["eval"] == saved["cosearch"]["eval"]
