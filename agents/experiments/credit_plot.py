"""`credit.png`: the credit view (`agents.experiments.credit`) as one grid per learner, the rollouts as rows and
their rounds as cells coloured by the advantage the learner gives them, on one colour scale, so that what a
learner changes next to GRPO shows at a glance. The first panel is the batch itself: each round's action and
judge labels, each rollout's outcome. COSEARCH's ranker panel has its own rows: the rollouts of COSEARCH's
last RL step that called the ranker. Each panel's caption says in two lines what the learner does and what
to look for, from this batch's numbers (`agents.experiments.credit_report`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from agents.experiments.credit_report import LABELS, TOLERANCE, differs_from_grpo, groups_with_signal, question_labels, round_code

PANELS = ("grpo", "cw-grpo", "e-grpo", "cosearch", "ranker", "dr-grpo", "gspo")
"""The learner panels in drawing order (after the batch's), those in the view only."""

COLUMNS = 4
"""Panels per row of the figure."""
FONT = 7.5
"""Cell and row-label text."""
CAPTION = 8.5
"""Panel titles and captions."""


def _captions(view: dict[str, Any]) -> dict[str, str]:
    """Two short lines per panel: what the learner does, then what to look for in this batch."""
    n = len(view["rollouts"])
    k0, g = groups_with_signal(view, "grpo")
    out = {"grpo": "One advantage per rollout: (EM - mean) / group std.\n"
                   f"Look for: all 0 where a group scored alike ({g - k0}/{g})."}
    learners = view["learners"]
    if "cw-grpo" in learners:
        moved = len(differs_from_grpo(view, "cw-grpo"))
        positive = any(_first(view, "grpo", i) > TOLERANCE for i in range(n))
        out["cw-grpo"] = ("GRPO's advantage moved onto contributing searches.\n"
                          + (f"Look for: right answers' other searches at 0 ({moved}/{n})." if moved
                             else "Here GRPO's: right answers' searches all contributed." if positive
                             else "Here GRPO's: no rollout beat its group, nothing to move."))
    if "e-grpo" in learners:
        k = groups_with_signal(view, "e-grpo")[0]
        partial = any(0 < r < 1 for r in learners["e-grpo"]["reward"])
        out["e-grpo"] = ("Wrong answers earn 0.3 x relative entity match.\n"
                         + (f"Look for: signal GRPO lacks ({k}/{g} groups, GRPO {k0})." if k > k0
                            else "Look for: wrong answers naming entities pushed down less." if differs_from_grpo(view, "e-grpo")
                            else "Here GRPO's: equal partial credit within each group." if partial
                            else "Here GRPO's: no wrong answer matched an entity."))
    if "cosearch" in learners:
        out["cosearch"] = ("F1 (-0.2 for a bad format) replaces EM, per group.\n"
                           + ("Look for: partial F1 and format penalties."
                              if differs_from_grpo(view, "cosearch") else "Here GRPO's: F1 was 0 or 1, no format error."))
    if view.get("ranker", {}).get("calls"):
        out["ranker"] = ("Own last step's calls (own rollouts): Eq. 6 reward\n(text), advantage in its cluster (colour); grey: dropped.")
    if "gspo" in learners:
        out["gspo"] = "GRPO's advantages: GSPO changes only the loss\n(a clipped ratio per sequence, not per token)."
    if "dr-grpo" in learners:
        paler = all(abs(d) <= abs(a) + TOLERANCE for a, d in ((_first(view, "grpo", i), _first(view, "dr-grpo", i)) for i in range(n)))
        out["dr-grpo"] = ("Reward - group mean, not divided by the std.\n"
                          + ("Look for: GRPO's pattern, paler (std under 1)." if paler else "Look for: GRPO's signs, other sizes."))
    return out


def _first(view: dict[str, Any], name: str, i: int) -> float:
    values = [v for v in view["learners"][name]["rounds"][i] if v is not None]
    return values[0] if values else 0.0


def _grid(view: dict[str, Any], panel: str, width: int) -> tuple[list[list[float]], list[list[str]], list[tuple[int, int]]]:
    """(values, texts, grey) per rollout and round: the advantages (NaN where there is none), what each cell
    says, and the cells that carry no signal although they exist (out of the loss; a dropped ranker call)."""
    rows = view["rollouts"]
    if panel == "ranker":
        return _ranker_grid(view, width)
    values = [[math.nan] * width for _ in rows]
    texts = [[""] * width for _ in rows]
    grey = []
    column = view["learners"][panel]
    for i, rounds in enumerate(column["rounds"]):
        for t, v in enumerate(rounds[:width]):
            if not column["include"][i]:
                texts[i][t] = "out"
                grey.append((i, t))
            elif v is not None:
                values[i][t], texts[i][t] = v, "0" if abs(v) <= TOLERANCE else f"{v:+.1f}"
    return values, texts, grey


def ranker_rows(view: dict[str, Any]) -> list[tuple[int, str]]:
    """The rollouts of COSEARCH's last step that called the ranker, in order, each with its row label: its
    index in that step, its question (numbered as the shared batch's) and its answer F1 (the calls' r_main)."""
    labels = question_labels(view)
    seen: dict[int, str] = {}
    for c in view["ranker"]["calls"]:
        seen.setdefault(c["trajectory"], f"{labels.get(c['question'], '?')} #{c['trajectory'] + 1} F1 {c['r_main']:.2f}")
    return sorted(seen.items())


def _ranker_grid(view: dict[str, Any], width: int) -> tuple[list[list[float]], list[list[str]], list[tuple[int, int]]]:
    """`_grid` of the ranker panel: its own rows (`ranker_rows`), their labels in a first column (the panel sits
    between others, with no room for tick labels), then one cell per round."""
    rows = ranker_rows(view)
    row_of = {t: k for k, (t, _) in enumerate(rows)}
    values = [[math.nan] * (width + 1) for _ in rows]
    texts = [[label] + [""] * width for _, label in rows]
    grey = []
    for c in view["ranker"]["calls"]:
        i, t = row_of[c["trajectory"]], c["turn"] + 1
        if t <= width:
            texts[i][t] = f"r{c['reward']:+.2f}"
            if c["advantage"] is None:
                grey.append((i, t))
            else:
                values[i][t] = c["advantage"]
    return values, texts, grey


def _batch_panel(ax, view: dict[str, Any], width: int) -> None:
    """The batch: each round's code (`round_code`) on a colour that says what the env made of it."""
    from matplotlib.colors import to_rgb

    rows = view["rollouts"]
    image = [[to_rgb("white")] * width for _ in rows]
    for i, row in enumerate(rows):
        for t, r in enumerate(row["rounds"][:width]):
            if r["action"] == "search":
                colour = "#9ed99e" if r["p"] == 1 else "#dddddd"
            elif r["action"] == "answer":
                colour = "#4caf50" if row["em"] >= 1 else "#f4a6a6"
            else:
                colour = "#ffcc80"
            image[i][t] = to_rgb(colour)
            ax.text(t, i, round_code(r), ha="center", va="center", fontsize=FONT)
    ax.imshow(image, aspect="auto", interpolation="nearest")
    ax.set_title("The batch: rounds, judge labels, outcomes\nS11: search, labels u v (green: both 1); A: answer\n"
                 "(green: right); I: invalid; X: cut at the token budget", fontsize=CAPTION, loc="left")
    ax.set_yticks(range(len(rows)), [f"q{r['group'] + 1}.{r['sample'] + 1}  EM {r['em']:.0f}  F1 {r['f1']:.2f}  ent {r['entity_rate']:.2f}"
                                      for r in rows], fontsize=FONT)


def _ranker_questions(view: dict[str, Any]) -> list[str]:
    """The question of each row of the ranker panel."""
    question = {c["trajectory"]: c["question"] for c in view["ranker"]["calls"]}
    return [question[t] for t, _ in ranker_rows(view)]


def _question_lines(ax, groups: list) -> None:
    for k in range(1, len(groups)):
        if groups[k] != groups[k - 1]:
            ax.axhline(k - 0.5, color="black", linewidth=1.2)


def plot_credit(view: dict[str, Any], path: str | Path):
    """Draw and save `credit.png` for one view; returns the figure, saved and closed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.patches import Rectangle

    rows = view["rollouts"]
    width = max(1, max(len(r["rounds"]) for r in rows))
    panels = [p for p in PANELS if p in view["learners"] or (p == "ranker" and view.get("ranker", {}).get("calls"))]
    grids = {p: _grid(view, p, width) for p in panels}
    scale = max([abs(v) for values, _, _ in grids.values() for line in values for v in line if not math.isnan(v)] + [1e-6])
    captions = _captions(view)
    nrows = math.ceil((len(panels) + 1) / COLUMNS)
    fig, axes = plt.subplots(nrows, COLUMNS, figsize=(4.4 * COLUMNS, (0.19 * len(rows) + 1.6) * nrows), squeeze=False,
                             gridspec_kw={"wspace": 0.08, "hspace": 0.25})
    flat = [ax for line in axes for ax in line]
    _batch_panel(flat[0], view, width)
    # No round: white. Advantage 0 is RdBu's near-white too, so those cells say "0".
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="white")
    image = None
    for ax, panel in zip(flat[1:], panels):
        values, texts, grey = grids[panel]
        image = ax.imshow(values, aspect="auto", interpolation="nearest", cmap=cmap, vmin=-scale, vmax=scale)
        for i, t in grey:
            ax.add_patch(Rectangle((t - 0.5, i - 0.5), 1, 1, color="#bdbdbd"))
        for i, line in enumerate(texts):
            for t, text in enumerate(line):
                if text:
                    dark = not math.isnan(values[i][t]) and abs(values[i][t]) > 0.6 * scale
                    ax.text(t, i, text, ha="center", va="center", fontsize=FONT, color="white" if dark else "black")
        name = "COSEARCH ranker" if panel == "ranker" else LABELS.get(panel, panel)
        ax.set_title(f"{name}\n{captions[panel]}", fontsize=CAPTION, loc="left")
        if panel == "ranker":  # its own rollouts, labelled in its first column
            ax.set_yticks([])
            ax.set_xticks(range(width + 1), ["rollout", *(f"round {t + 1}" for t in range(width))], fontsize=FONT)
            labels = question_labels(view)
            _question_lines(ax, [labels.get(c, c) for c in _ranker_questions(view)])
        else:
            ax.set_xticks(range(width), [f"round {t + 1}" for t in range(width)], fontsize=FONT)
            ax.set_yticks(range(len(rows)), [f"q{r['group'] + 1}.{r['sample'] + 1}" for r in rows] if ax in axes[:, 0] else [],
                          fontsize=FONT)
            _question_lines(ax, [r["group"] for r in rows])
        ax.tick_params(axis="y", length=0)
    _question_lines(flat[0], [r["group"] for r in rows])
    flat[0].set_xticks(range(width), [f"round {t + 1}" for t in range(width)], fontsize=FONT)
    for ax in flat[len(panels) + 1:]:
        ax.axis("off")
    if image is not None:
        bar = fig.colorbar(image, ax=flat, fraction=0.012, pad=0.015)
        bar.set_label("advantage (blue: made more likely, red: less likely)", fontsize=CAPTION)
    b = view.get("batch", {})
    fig.suptitle(f"Credit view: one batch of {b.get('questions', '?')} questions x {b.get('group', '?')} rollouts from the cold-started "
                 "policy, and the advantage each learner gives each round (black lines separate questions)", fontsize=12)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return fig
