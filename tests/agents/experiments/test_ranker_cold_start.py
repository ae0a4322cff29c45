"""`python -m agents.experiments.ranker_cold_start` end to end with the tiny random model."""

import argparse
import json

import gymnasium as gym
import pytest

from agents.experiments import ranker_cold_start
from agents.learners import ranker_sft
from tests.helpers import hotpot_record


def test_the_benchmark_measures_before_and_after_at_both_temperatures(capsys):
    ranker_cold_start.main(["--model", "tiny", "--steps", "1", "2", "--requests", "3", "--num-entities", "300",
                            "--train-questions", "10", "--test-questions", "10", "--threads", "1", "--show", "1"])
    lines = capsys.readouterr().out.splitlines()
    measured = [line.split(":")[0].split() for line in lines if ": valid " in line]
    # Before at both temperatures, step 1 at the sampling temperature only, the last count at both.
    assert measured == [["before", "T=1.0"], ["before", "greedy"], ["after", "1", "steps", "T=1.0"],
                        ["after", "2", "steps", "T=1.0"], ["after", "2", "steps", "greedy"]]
    assert sum("output:" in line for line in lines) == 5


def test_step_counts_must_increase():
    with pytest.raises(SystemExit):
        ranker_cold_start.main(["--model", "tiny", "--steps", "4", "2"])


def test_over_a_question_file_it_trains_on_the_first_questions_and_holds_out_the_rest(tmp_path, capsys, monkeypatch):
    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps([hotpot_record(i, distractors=1) for i in range(6)]))
    held, trained = [], []
    real_held_out, real_steps = ranker_cold_start.held_out, ranker_sft.supervised_ranker_steps

    def spy_held_out(env, *args):
        held.extend(r.id for r in env.unwrapped.records)
        return real_held_out(env, *args)

    def spy_steps(model, tokenizer, env, *args, **kwargs):
        trained.extend(r.id for r in env.unwrapped.records)
        return real_steps(model, tokenizer, env, *args, **kwargs)

    monkeypatch.setattr(ranker_cold_start, "held_out", spy_held_out)
    monkeypatch.setattr(ranker_sft, "supervised_ranker_steps", spy_steps)
    ranker_cold_start.main(["--model", "tiny", "--steps", "1", "--requests", "4", "--data-path", str(path),
                            "--train-questions", "4", "--test-questions", "2", "--top-k", "1", "--threads", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert f"SearchQA-HotpotQA-v0 over {path}" in lines[0]
    # Two held-out questions, one oracle search per gold title: 4 requests.
    assert "4 held-out requests" in lines[0]
    assert trained == ["h0", "h1", "h2", "h3"] and held == ["h4", "h5"]
    assert [line.split(":")[0].split() for line in lines if ": valid " in line] == [
        ["before", "T=1.0"], ["before", "greedy"], ["after", "1", "steps", "T=1.0"], ["after", "1", "steps", "greedy"]]


def test_a_question_file_without_enough_held_out_searches_says_so(tmp_path):
    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps([hotpot_record(i, distractors=1) for i in range(3)]))
    with pytest.raises(SystemExit, match="only 2 oracle searches"):
        ranker_cold_start.main(["--model", "tiny", "--requests", "5", "--data-path", str(path),
                                "--train-questions", "2", "--test-questions", "1", "--top-k", "1", "--threads", "1"])


def test_a_presets_world_with_requests_held_out_from_its_validation_split(capsys, monkeypatch):
    made = []
    real_make = gym.make

    def spy_make(env_id, **kwargs):
        made.append((env_id, kwargs))
        return real_make(env_id, **kwargs)

    monkeypatch.setattr(gym, "make", spy_make)
    ranker_cold_start.main(["--model", "tiny", "--steps", "1", "--requests", "3", "--preset", "cpu-ranker",
                            "--env-option", "num_entities=300", "--held-out", "validation",
                            "--train-questions", "10", "--test-questions", "10", "--threads", "1"])
    (_, train), (_, held) = made
    # cpu-ranker's world (its decoys, its validation share, k=1, world seed 0), entities as the option says.
    for kwargs in (train, held):
        assert {k: kwargs[k] for k in ("num_entities", "hops", "top_k", "seed", "decoy_rate", "validation_fraction")} == {
            "num_entities": 300, "hops": (2,), "top_k": 1, "seed": 0, "decoy_rate": 0.5, "validation_fraction": 0.1}
    assert (train["split"], held["split"]) == ("train", "validation")
    header = capsys.readouterr().out.splitlines()[0]
    assert "validation split, preset cpu-ranker, decoy_rate=0.5" in header and "N=5, k=1)" in header


@pytest.mark.parametrize("given, split", [
    ({"preset": "cpu-ranker"}, "validation"),  # a preset with a validation split holds out from it
    ({"preset": "cpu-ranker", "held_out": "test"}, "test"),
    ({}, "test"),
])
def test_the_held_out_split_defaults_to_a_presets_validation_split(given, split):
    args = argparse.Namespace(**{"preset": None, "held_out": None, "env_option": ["num_entities=300"], "num_entities": 300,
                                 "hops": [2], "top_k": 2, "seed": 0, **given})
    world, held = ranker_cold_start.synthetic_world(args)
    assert held == split and world["num_entities"] == 300
    assert world.get("decoy_rate") == (0.5 if args.preset else None)


@pytest.mark.parametrize("argv, message", [
    (["--preset", "cpu-hotpotqa"], "not the synthetic world"),
    (["--preset", "no-such"], "no preset 'no-such'"),
])
def test_a_preset_that_is_not_a_synthetic_world_is_refused(argv, message):
    with pytest.raises(SystemExit, match=message):
        ranker_cold_start.main(["--model", "tiny", "--threads", "1", *argv])


def test_a_question_file_does_not_take_world_options(tmp_path, capsys):
    with pytest.raises(SystemExit):
        ranker_cold_start.main(["--model", "tiny", "--data-path", str(tmp_path / "q.json"), "--held-out", "validation"])
    assert "--data-path reads a question file instead" in capsys.readouterr().err
