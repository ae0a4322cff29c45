"""The learners comparison (`python -m benchmarks.learners`): the pipeline on a tiny model, and the
learning check's arithmetic on literal numbers."""

from __future__ import annotations

import json

import pytest

from benchmarks import learners


def _seed(base: float, start: float, **final: float) -> dict:
    out = {"base": {"eval": {"eval/em": base}}, "start": {"eval": {"eval/em": start}}}
    out.update({name: {"eval": {"eval/em": em}} for name, em in final.items()})
    return out


def _row(table: str, name: str) -> list[str]:
    line = next(row for row in table.splitlines() if row.startswith(f"| {name} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_learning_check_noise_is_the_std_over_seeds():
    per_seed = {0: _seed(0.0, 0.25, grpo=0.5, **{"e-grpo": 0.25}), 1: _seed(0.0, 0.35, grpo=0.3, **{"e-grpo": 0.45})}
    table = learners.learning_check(per_seed, ["grpo", "e-grpo"], eval_questions=20)
    assert "std over 2 seeds" in table
    # grpo: EM 0.5, 0.3 -> mean 0.4, sample std 0.1414; base 0, 0 (std 0); start 0.25, 0.35 -> mean 0.3, std 0.0707.
    assert _row(table, "grpo") == ["grpo", "0.500, 0.300", "0.400", "0.141", "+0.400", "yes", "+0.100", "no"]
    # e-grpo: EM 0.25, 0.45 -> mean 0.35, std 0.1414: +0.05 over start is within the noise.
    assert _row(table, "e-grpo") == ["e-grpo", "0.250, 0.450", "0.350", "0.141", "+0.350", "yes", "+0.050", "no"]
    assert _row(table, "start")[:6] == ["start", "0.250, 0.350", "0.300", "0.071", "+0.300", "yes"]


def test_learning_check_with_one_seed_uses_the_binomial_standard_error():
    table = learners.learning_check({3: _seed(0.0, 0.5, grpo=0.75)}, ["grpo"], eval_questions=16)
    assert "binomial SE on 16 questions" in table
    # SE(0.75, n=16) = sqrt(0.75 * 0.25 / 16) = 0.108; SE(0.5) = 0.125 is the larger, and +0.25 exceeds it.
    assert _row(table, "grpo") == ["grpo", "0.750", "0.750", "0.108", "+0.750", "yes", "+0.250", "yes"]


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
    report = (tmp_path / "results.md").read_text()
    assert "std over 2 seeds" in report and "| cosearch |" in report
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "seed1" / "curves.png").exists()
