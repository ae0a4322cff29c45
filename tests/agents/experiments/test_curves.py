"""`agents.experiments.curves`: learners with identical numbers stay visible, and evaluation on the fixed test
questions is drawn next to the training curves."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from agents.experiments.curves import plot_curves  # noqa: E402

LEARNERS = ["grpo", "cw-grpo", "e-grpo", "cosearch"]


def _history(rewards, **extra):
    return [{"step": i + 1, "rollout/reward": r, "rollout/em": r, "rollout/searches_mean": 1.0, "rollout/entity_rate": 0.5,
             **{k: v[i] for k, v in extra.items() if i < len(v)}} for i, r in enumerate(rewards)]


def fake_results(periodic: bool = False, steps: int = 3) -> dict:
    """One seed of results.json as the main job writes it: three learners with the very same training
    numbers (as seen in a real run), the reward falling over steps that drew other questions."""
    same = [0.5, 0.25, 0.0, 0.25, 0.5, 0.75][:steps]
    extra = {"eval/em": [0.2, 0.25, 0.3]} if periodic else {}
    results = {"base": {"eval": {"eval/em": 0.0, "eval/questions": 20.0}},
               "start": {"eval": {"eval/em": 0.2, "eval/questions": 20.0}}}
    for name, rewards, final in (("grpo", same, 0.2), ("cw-grpo", same, 0.2), ("e-grpo", [0.5] * (steps - 1) + [0.25], 0.25),
                                 ("cosearch", same, 0.15)):
        results[name] = {"history": _history(rewards, **extra), "eval": {"eval/em": final, "eval/questions": 20.0}}
    return json.loads(json.dumps(results))  # what reading results.json back gives


def _axis(fig, title_start):
    return next(ax for ax in fig.axes if ax.get_title().startswith(title_start))


def test_identical_learners_get_their_own_marker_style_and_offset(tmp_path):
    fig = plot_curves(fake_results(steps=6), LEARNERS, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = {line.get_label(): line for line in _axis(fig, "training: reward").get_lines()}
    assert list(lines) == LEARNERS
    assert len({line.get_marker() for line in lines.values()}) == 4
    assert len({str(line.get_linestyle()) for line in lines.values()}) == 4
    grpo, cw = lines["grpo"], lines["cw-grpo"]
    assert list(grpo.get_ydata()) == list(cw.get_ydata())  # same numbers ...
    assert all(abs(a - b) > 0.05 for a, b in zip(grpo.get_xdata(), cw.get_xdata()))  # ... drawn side by side


def test_without_periodic_eval_the_second_panel_is_test_em_before_and_after(tmp_path):
    fig = plot_curves(fake_results(), LEARNERS, tmp_path / "curves.png")
    ax = _axis(fig, "evaluation")
    assert "same 20 held-out questions" in ax.get_title()
    points = {line.get_gid(): (float(line.get_xdata()[0]), float(line.get_ydata()[0])) for line in ax.get_lines() if line.get_gid()}
    # After RL right of each learner's tick, before RL (the shared cold-started policy, EM 0.2) left of it.
    expected = {"after:grpo": (0.15, 0.2), "after:cw-grpo": (1.15, 0.2), "after:e-grpo": (2.15, 0.25), "after:cosearch": (3.15, 0.15),
                **{f"before:{n}": (i - 0.15, 0.2) for i, n in enumerate(LEARNERS)}}
    assert set(points) == set(expected)
    for gid, xy in expected.items():
        assert points[gid] == pytest.approx(xy), gid
    assert [t.get_text() for t in ax.get_xticklabels()] == LEARNERS


def test_periodic_eval_is_drawn_over_steps(tmp_path):
    fig = plot_curves(fake_results(periodic=True), LEARNERS, tmp_path / "curves.png")
    lines = {line.get_label(): line for line in _axis(fig, "evaluation").get_lines() if line.get_label() in LEARNERS}
    assert list(lines) == LEARNERS and list(lines["grpo"].get_ydata()) == [0.2, 0.25, 0.3]


def test_few_steps_are_points_without_lines_and_name_their_questions(tmp_path):
    # 3 steps (< MIN_TREND_STEPS): no line joins a learner's steps, each its own questions; the credit view's record
    # of each step's question hops labels the ticks.
    results = fake_results(steps=3)
    results["credit"] = {"training_steps": [{"step": 1, "hops": [2, 1]}, {"step": 2, "hops": [1, 1]}, {"step": 3, "hops": [2, 2]}]}
    fig = plot_curves(results, LEARNERS, tmp_path / "curves.png")
    ax = _axis(fig, "training: reward")
    assert {str(line.get_linestyle()) for line in ax.get_lines()} == {"None"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["step 1\n1-hop, 2-hop", "step 2\n1-hop, 1-hop", "step 3\n2-hop, 2-hop"]
    assert "compare learners within a step" in ax.get_xlabel()
    # without the record the ticks are the steps alone
    plain = _axis(plot_curves(fake_results(steps=3), LEARNERS, tmp_path / "plain.png"), "training: reward")
    assert [t.get_text() for t in plain.get_xticklabels()] == ["step 1", "step 2", "step 3"]
