"""`python -m agents.experiments.ranker_cold_start` end to end with the tiny random model."""

import pytest

from agents.experiments import ranker_cold_start


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
