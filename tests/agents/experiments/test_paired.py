"""`agents.experiments.paired`: the paired statistics behind the learning check and `compare --paired`, by hand."""

import math

import pytest

from agents.experiments.paired import paired_difference


def test_two_seeds_by_hand():
    # Seed 0 fixes question 0 (+0.25), seed 1 questions 0 and 1 (+0.5). Per question over seeds: 1, 0.5, 0, 0
    # (mean 0.375, sample std 0.479, SE 0.239); per seed 0.25, 0.5 (std 0.177, SE 0.125). 0.375 < 2 x 0.239.
    d = paired_difference([[1, 0, 0, 0], [1, 1, 0, 0]])
    assert d.per_seed == [0.25, 0.5] and d.mean == 0.375
    assert d.se_questions == pytest.approx(0.2394, abs=1e-4) and d.se_seeds == pytest.approx(0.125)
    assert d.verdict == "no" and d.cells() == ["+0.250, +0.500", "+0.375", "0.239", "0.125", "no", "1/0, 2/0"]
    assert paired_difference([[0.5, -0.25, 0.0]]).cells()[-1] == "1/1"  # Avg@k differences: up or down by any amount


def test_verdicts_and_one_seed():
    many = [[1.0] * 30 + [0.0] * 10]  # one seed: +0.75, SE over questions 0.069
    d = paired_difference(many)
    assert math.isnan(d.se_seeds) and d.cells()[3] == "-" and d.verdict == "yes" and (d.up, d.down) == ([30], [0])
    assert paired_difference([[-x for x in many[0]]]).verdict == "worse"
    assert paired_difference([[0.0, 1.0, -1.0, 0.0]]).verdict == "no"
    assert paired_difference([[1.0]]).bound == math.inf  # one question, one seed: no noise estimate, nothing beyond it
    with pytest.raises(ValueError, match="one row of per-question differences per seed"):
        paired_difference([1.0, 0.0])
