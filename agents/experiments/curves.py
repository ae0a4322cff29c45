"""`curves.png` of the learner comparison: training curves that keep every learner visible, and the
evaluation on a fixed question set.

Two rows. The top row is what the learners saw while training (reward, EM, searches per episode, entity
match rate per RL step). Each step draws other questions, so a falling reward there can be harder
questions, not a worse policy. With fewer than `MIN_TREND_STEPS` steps the values are points without lines,
each step's tick naming its questions' hops (`step_labels`): a line through so few different batches would
draw a trend they cannot have. Learners often produce the very same numbers (same seed, same questions,
updates too small to change a greedy choice), and identical points would hide each other: every learner
gets its own marker (and, over enough steps, line style) and a small horizontal offset, so all of them stay
visible.

The bottom row is evaluation on the same held-out questions for every policy: when the history carries
periodic evaluations (`eval/em` at some steps) they are drawn over steps; otherwise each learner's test EM
before RL (the shared cold-started policy) and after, with the base policy's EM for reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MARKERS = ("o", "s", "^", "D", "v", "P")
STYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (1, 2)))
OFFSET = 0.08
"""Horizontal offset between learners, in RL steps."""
MIN_TREND_STEPS = 5
"""Below this many RL steps the training panels draw each step's values as points, without lines: a line
through 2-4 steps, each on other questions, would suggest a trend that so few different batches cannot show."""

TRAINING_PANELS = (("rollout/reward", "reward"), ("rollout/em", "EM"), ("rollout/searches_mean", "searches / episode"),
                   ("rollout/entity_rate", "entity match rate"))


def plot_curves(results: dict[str, Any], learners: list[str], path: str | Path):
    """Draw and save the figure for one seed's `results` (as in `results.json`: `base` and `start` with
    `eval`, each learner with `history` and `eval`). Returns the matplotlib figure, saved and closed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(16, 7.2))
    grid = fig.add_gridspec(2, len(TRAINING_PANELS), height_ratios=(1, 1.1))
    spread = (len(learners) - 1) / 2
    steps = sorted({m["step"] for name in learners for m in results[name]["history"]})
    few = 0 < len(steps) < MIN_TREND_STEPS
    for col, (key, title) in enumerate(TRAINING_PANELS):
        ax = fig.add_subplot(grid[0, col])
        for k, name in enumerate(learners):
            hist = results[name]["history"]
            if not any(key in m for m in hist):  # no such training metric (the supervised control has no rollouts)
                continue
            ax.plot([m["step"] + (k - spread) * OFFSET for m in hist], [m.get(key, float("nan")) for m in hist],
                    marker=MARKERS[k % len(MARKERS)], linestyle="none" if few else STYLES[k % len(STYLES)], markersize=6, alpha=0.85,
                    label=name)
        ax.set_title(f"training: {title}", fontsize=10)
        if few:
            ax.set_xticks(steps, step_labels(results, steps), fontsize=8)
            ax.set_xlim(steps[0] - 0.5, steps[-1] + 0.5)
            ax.set_xlabel("RL step: its own questions (their hops); compare learners within a step", fontsize=8)
        else:
            ax.set_xlabel("RL step (new questions each step)", fontsize=8)
        if col == 0:
            ax.legend(fontsize=8)
    ax = fig.add_subplot(grid[1, : len(TRAINING_PANELS) // 2 + 1])
    if any("eval/em" in m for name in learners for m in results[name]["history"]):
        _periodic_eval(ax, results, learners, spread)
    else:
        _before_after(ax, results, learners)
    note = fig.add_subplot(grid[1, len(TRAINING_PANELS) // 2 + 1 :])
    note.axis("off")
    note.text(0, 0.95, _caption(results, learners), va="top", fontsize=9, wrap=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)  # out of pyplot's registry (a run draws one per seed); the returned figure stays readable
    return fig


def step_labels(results: dict[str, Any], steps: list[int]) -> list[str]:
    """Each RL step's tick: its number, and the hop counts of the questions it trained on where the run's credit
    view recorded them (`agents.experiments.credit`: the same seed draws the same questions for every learner).

    >>> step_labels({"credit": {"training_steps": [{"step": 1, "hops": [2, 1]}]}}, [1, 2])
    ['step 1\\n1-hop, 2-hop', 'step 2']
    """
    hops = {s["step"]: s["hops"] for s in results.get("credit", {}).get("training_steps", [])}
    return [f"step {k}" + (f"\n{', '.join(f'{h}-hop' for h in sorted(hops[k]))}" if hops.get(k) and None not in hops[k] else "")
            for k in steps]


def _periodic_eval(ax, results: dict[str, Any], learners: list[str], spread: float) -> None:
    for k, name in enumerate(learners):
        points = [(m["step"], m["eval/em"]) for m in results[name]["history"] if "eval/em" in m]
        ax.plot([s + (k - spread) * OFFSET for s, _ in points], [em for _, em in points], marker=MARKERS[k % len(MARKERS)],
                linestyle=STYLES[k % len(STYLES)], label=name)
    _references(ax, results)
    ax.set_xlabel("RL step")
    ax.set_title(f"evaluation: test EM on the same {_questions(results, learners)} held-out questions (greedy)", fontsize=10)
    ax.legend(fontsize=8)


def _before_after(ax, results: dict[str, Any], learners: list[str]) -> None:
    start = results["start"]["eval"]["eval/em"]
    for k, name in enumerate(learners):
        after = results[name]["eval"]["eval/em"]
        # Before on the left, after on the right of the learner's tick: equal values stay two visible points.
        ax.annotate("", xy=(k + 0.15, after), xytext=(k - 0.15, start), arrowprops={"arrowstyle": "->", "color": "0.5"})
        ax.plot([k - 0.15], [start], marker="o", markerfacecolor="white", color="C0", markersize=9, gid=f"before:{name}",
                label="before RL (cold-started)" if k == 0 else None)
        ax.plot([k + 0.15], [after], marker=MARKERS[k % len(MARKERS)], color="C1", markersize=9, linestyle="none", gid=f"after:{name}",
                label="after RL" if k == 0 else None)
        ax.text(k + 0.25, after, f"{after:.2f}", va="center", fontsize=8)
    _references(ax, results)
    ax.set_xticks(range(len(learners)), learners)
    ax.set_xlim(-0.5, len(learners) - 0.5)
    ax.set_title(f"evaluation: test EM on the same {_questions(results, learners)} held-out questions, before and after RL",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper right")


def _references(ax, results: dict[str, Any]) -> None:
    if "base" in results:  # a preset may skip the base policy's evaluation
        ax.axhline(results["base"]["eval"]["eval/em"], color="0.6", linestyle=":", label="base policy (as released)")
    ax.axhline(results["start"]["eval"]["eval/em"], color="C0", linestyle="--", linewidth=0.8, label="cold-started policy")
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("test EM")


def _questions(results: dict[str, Any], learners: list[str]) -> str:
    n = results["start"]["eval"].get("eval/questions")
    return str(int(n)) if n else "the"


def _caption(results: dict[str, Any], learners: list[str]) -> str:
    steps = len({m["step"] for name in learners for m in results[name]["history"]})
    if 0 < steps < MIN_TREND_STEPS:
        text = (f"Top: each RL step's rollouts, one point per learner. {steps} step(s) are too few for a trend, so no lines: "
                "every step trains on other questions (easier or harder ones), so compare the learners within a step, where "
                "they saw the same questions, not the steps with each other. What each learner does differently with the "
                "same rollouts is in credit.png.")
    else:
        text = ("Top: rollouts during training. Every RL step samples other questions, so these curves mix question "
                "difficulty with learning.")
    text += (" Learners with equal numbers are drawn side by side (small offsets, one marker each).\n\nBottom: greedy test EM "
             "on one fixed set of held-out questions, the same for every policy: the comparison to read.")
    n = results["start"]["eval"].get("eval/questions")
    if n:
        text += (f" One question of {int(n)} is {1 / n:.2f} EM: differences of a few questions are within the noise "
                 "(the learning check in results.md).")
    return text
