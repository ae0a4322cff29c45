"""The credit view's report (`agents.experiments.credit`): what each learner did with the shared batch, said in
words from its numbers (`learner_notes`), the per-rollout table of `results.md` (`credit_section`) and the
figure `credit.png` (`agents.experiments.credit_plot`).

A learner "gives GRPO's signal" on a rollout when every round's advantage and its place in the loss equal
GRPO's; where a learner gives GRPO's signal on the whole batch, its note says why (e.g. every right rollout's
searches all contributed, so CW-GRPO had nothing to move).
"""

from __future__ import annotations

from typing import Any

from agents.experiments.credit import CUT

TOLERANCE = 1e-6
"""Advantages closer than this are the same (they come from one float computation in different orders)."""

LABELS = {"grpo": "GRPO", "cw-grpo": "CW-GRPO", "e-grpo": "E-GRPO", "cosearch": "COSEARCH agent", "gspo": "GSPO", "dr-grpo": "Dr.GRPO"}


def _values(rounds: list[float | None]) -> list[float]:
    return [v for v in rounds if v is not None]


def outcome_advantage(view: dict[str, Any], name: str, i: int) -> float:
    """Rollout i's advantage under a learner that gives every round one value (GRPO and its kin): its first
    round's (0 for a rollout without a round)."""
    values = _values(view["learners"][name]["rounds"][i])
    return values[0] if values else 0.0


def differs_from_grpo(view: dict[str, Any], name: str) -> list[int]:
    """The rollouts on which learner `name`'s signal is not GRPO's: another advantage on some round, or another
    place in the loss (left out by one of the two)."""
    grpo, other = view["learners"]["grpo"], view["learners"][name]
    out = []
    for i, (a, b) in enumerate(zip(grpo["rounds"], other["rounds"])):
        same = grpo["include"][i] == other["include"][i] and len(a) == len(b) and all(
            (x is None) == (y is None) and (x is None or abs(x - y) <= TOLERANCE) for x, y in zip(a, b))
        if not same:
            out.append(i)
    return out


def groups_with_signal(view: dict[str, Any], name: str) -> tuple[int, int]:
    """(groups in which some rollout in the loss has a nonzero advantage on some round, groups)."""
    column, rows = view["learners"][name], view["rollouts"]
    signal: dict[int, bool] = {}
    for row, rounds, included in zip(rows, column["rounds"], column["include"]):
        live = included and any(abs(v) > TOLERANCE for v in _values(rounds))
        signal[row["group"]] = signal.get(row["group"], False) or live
    return sum(signal.values()), len(signal)


CW_KINDS = {"zero": "advantage 0 (their group's rewards were equal)",
            "negative": "a negative advantage, which CW-GRPO spreads evenly over the rounds",
            "all contributed": "a positive advantage and every search round contributing (u = v = 1)",
            "no search": "a positive advantage and no search round"}


def _cw_note(view: dict[str, Any], moved: list[int]) -> str:
    """Why CW-GRPO's rounds equal GRPO's on the rollouts it did not change, counted by `CW_KINDS`."""
    kinds = dict.fromkeys(CW_KINDS, 0)
    for i, row in enumerate(view["rollouts"]):
        if i in moved:
            continue
        a = outcome_advantage(view, "grpo", i)
        if abs(a) <= TOLERANCE:
            kinds["zero"] += 1
        elif a < 0:
            kinds["negative"] += 1
        elif all(r["action"] == "answer" for r in row["rounds"]):
            kinds["no search"] += 1
        else:
            kinds["all contributed"] += 1
    return "; ".join(f"{kinds[k]} with {text}" for k, text in CW_KINDS.items() if kinds[k])


def learner_notes(view: dict[str, Any]) -> dict[str, str]:
    """One sentence per learner of the view on what it did with this batch, next to GRPO."""
    rows, learners = view["rollouts"], view["learners"]
    n = len(rows)
    notes = {"grpo": "one advantage per rollout, (EM - group mean) / group std, copied to every round"}
    if "cw-grpo" in learners:
        moved = differs_from_grpo(view, "cw-grpo")
        rest = _cw_note(view, moved)
        if moved:
            notes["cw-grpo"] = (f"moved the advantage between rounds on {len(moved)} of {n} rollouts (right answers with a search round "
                                f"the judge did not count as contributing); GRPO's signal on the others: {rest}")
        else:
            notes["cw-grpo"] = f"GRPO's signal on every rollout, nothing to move: {rest}"
    if "e-grpo" in learners:
        e = learners["e-grpo"]
        partial = sum(0 < r < 1 for r in e["reward"])
        dropped = n - sum(e["include"])
        wrong = [i for i, row in enumerate(rows) if row["format_valid"] and row["em"] < 1 and row["finish"] != "over_long"]
        same = not differs_from_grpo(view, "e-grpo")
        if partial and same:
            why = [f"partial credit for {partial} of {len(wrong)} wrong, well-formed answers, but the same within each group (the same "
                   "share of gold entities matched), and rewards normalised within a group then give GRPO's advantages"]
        elif partial:
            why = [f"partial credit for {partial} of {len(wrong)} wrong, well-formed answers (their thinking matched gold entities)"]
        elif wrong:
            why = [f"none of the {len(wrong)} wrong, well-formed answers matched a gold entity in its thinking, so each earned 0, as under GRPO"]
        else:
            why = ["no answer was both wrong and well formed, so no partial credit to give"]
        if dropped:
            why.append(f"{dropped} over-long rollouts left out of the loss (their reward 0 stays in the group's statistics)")
        notes["e-grpo"] = ("GRPO's signal: " if same else "") + "; ".join(why)
    if "cosearch" in learners:
        penalized = sum(r < 0 for r in learners["cosearch"]["reward"])
        partial_f1 = sum(0 < row["f1"] < 1 for row in rows)
        changed = differs_from_grpo(view, "cosearch")
        what = f"answer F1 between 0 and 1 on {partial_f1} rollouts, the -0.2 format penalty on {penalized}"
        notes["cosearch"] = (f"another signal than GRPO's on {len(changed)} of {n} rollouts: {what}" if changed
                             else f"GRPO's signal: {what}, which normalised within each group gives GRPO's advantages")
    if "gspo" in learners:
        notes["gspo"] = "GRPO's advantages, always: GSPO changes the loss (a clipped sequence-level ratio), not the advantages"
    if "dr-grpo" in learners:
        changed = differs_from_grpo(view, "dr-grpo")
        flat = all(abs(v) <= TOLERANCE for rounds in learners["grpo"]["rounds"] for v in _values(rounds))
        same = "every group's rewards were equal (all advantages 0)" if flat else "every group's reward std was 1"
        notes["dr-grpo"] = ("reward - group mean without dividing by the group's std: GRPO's signs, other sizes"
                            + ("" if changed else f"; the same numbers here: {same}"))
    ranker = view.get("ranker")
    if ranker is not None:
        calls = ranker["calls"]
        kept = sum(c["advantage"] is not None for c in calls)
        notes["ranker"] = (f"in COSEARCH's own last RL step, {len(calls)} ranker calls ({sum(c['valid'] for c in calls)} parsed, "
                           f"{sum(c['has_answer'] for c in calls)} with an answer among the candidates); {ranker['groups']} clusters kept "
                           f"for its update, so {kept} calls with an advantage ({ranker['dropped_small']} clusters dropped as under 3 "
                           f"calls, {ranker['dropped_flat']} as all-equal rewards)")
    return notes


def question_labels(view: dict[str, Any]) -> dict[str, str]:
    """Question id -> `q<n>`, numbered as the shared batch's groups."""
    return {str(r["question_id"]): f"q{r['group'] + 1}" for r in view["rollouts"] if r.get("question_id") is not None}


def ranker_table(view: dict[str, Any]) -> str:
    """COSEARCH's ranker calls of its last RL step, one row each, as its update scored them."""
    labels = question_labels(view)
    calls = view["ranker"]["calls"]
    lines = ["COSEARCH's ranker, in COSEARCH's own last RL step: a ranker changes which documents the agent sees, so its calls "
             "come from COSEARCH's own rollouts, not from the shared batch. Each call as its update scored it: Eq. 6 from Hit@k "
             "of the shown order (r_rel) and the rollout's answer F1 (r_main), then GRPO within its cluster of similar sub-queries "
             "(clusters under 3 calls or with equal rewards are dropped: no advantage).", "",
             "| rollout | turn | question | sub-query | parsed | answer in pool | Hit@1/3/5 | r_rel | r_main | reward | cluster | advantage |",
             "|---" * 12 + "|"]
    for c in calls:
        hits = "/".join(f"{h:.0f}" for h in c["hits"])
        advantage = "-" if c["advantage"] is None else f"{c['advantage']:+.2f}"
        cluster = "dropped" if c["cluster"] is None else str(c["cluster"] + 1)
        query = c["query"].replace("|", "/")
        lines.append(f"| {c['trajectory'] + 1} | {c['turn'] + 1} | {labels.get(c['question'], c['question'])} | {query} | "
                     f"{'yes' if c['valid'] else 'no'} | {'yes' if c['has_answer'] else 'no'} | {hits} | {c['r_rel']:.2f} | "
                     f"{c['r_main']:.2f} | {c['reward']:+.2f} | {cluster} | {advantage} |")
    return "\n".join(lines)


def _rounds_text(rounds: list[float | None]) -> str:
    """One number when every round has it, else each round's (`.` for a round without tokens)."""
    values = _values(rounds)
    if values and max(values) - min(values) <= TOLERANCE:
        return f"{values[0]:+.2f}"
    return " / ".join("." if v is None else f"{v:+.2f}" for v in rounds)


def round_code(r: dict[str, Any]) -> str:
    """`S11`: a search with its labels u and v; `A` an answer, `I` an invalid action, `X` a round cut off."""
    if r["action"] == "search":
        return "S" + "".join("?" if x is None else str(int(x)) for x in (r["u"], r["v"]))
    return {"answer": "A", "invalid": "I", CUT: "X"}.get(r["action"], r["action"][:1].upper())


def credit_section(view: dict[str, Any]) -> str:
    """The credit view in `results.md`: the learners' notes, then one row per rollout."""
    rows, learners = view["rollouts"], view["learners"]
    b = view.get("batch", {})
    head = (f"Credit view: one batch of {b.get('questions', '?')} questions x {b.get('group', '?')} rollouts sampled once by the "
            f"cold-started policy (temperature {b.get('temperature', '?')}, seed {b.get('seed', '?')}), and the advantage each "
            "learner's own batch function gives each round (`agents.experiments.credit`; figure: credit.png).")
    lines = [head, "", "| learner | rollouts with another signal than GRPO's | groups with signal | what it did with this batch |",
             "|---|---|---|---|"]
    notes = learner_notes(view)
    for name in learners:
        k, g = groups_with_signal(view, name)
        differ = "-" if name == "grpo" else f"{len(differs_from_grpo(view, name))}/{len(rows)}"
        lines.append(f"| {LABELS.get(name, name)} | {differ} | {k}/{g} | {notes[name]} |")
    if "ranker" in notes:
        lines.append(f"| COSEARCH ranker | - | - | {notes['ranker']} |")
    questions: dict[int, dict[str, Any]] = {}
    for row in rows:
        questions.setdefault(row["group"], row)
    lines += ["", "Questions: " + "; ".join(f"q{g + 1} {r['question']!r} (gold {', '.join(r['gold'])}"
                                            + (f", {r['hops']}-hop)" if r.get("hops") else ")") for g, r in questions.items())]
    shown = [n for n in learners if n != "gspo"]
    lines += ["", "Rounds: S = search with its judge labels u (retrieval utility) and v (reasoning correctness); A = answer, I = invalid "
              "action, X = cut off at the token budget. Advantages: one number when every round gets it, else per round; (r ...) the "
              "learner's reward where it is not EM" + ("; GSPO's column would be GRPO's" if "gspo" in learners else "") + ".", ""]
    cols = ["q", "#", "rounds", "EM", "F1", "entities", *[LABELS.get(n, n) for n in shown]]
    lines += ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for i, row in enumerate(rows):
        cells = [f"q{row['group'] + 1}", str(row["sample"] + 1), " ".join(round_code(r) for r in row["rounds"]) or "-",
                 f"{row['em']:.0f}", f"{row['f1']:.2f}", f"{row['entity_rate']:.2f}"]
        for name in shown:
            column = learners[name]
            text = _rounds_text(column["rounds"][i])
            if name in ("e-grpo", "cosearch") and abs(column["reward"][i] - row["em"]) > TOLERANCE:
                text += f" (r {column['reward'][i]:.2f})"
            if not column["include"][i]:
                text += " out of the loss"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    if view.get("ranker", {}).get("calls"):
        lines += ["", ranker_table(view)]
    return "\n".join(lines)
