"""The report of `agents.experiments.signatures`: each method's premise against its bound, then each paper's
signature analysis in a table under a caption with the paper's own figure."""

from __future__ import annotations

import math
from typing import Any

SYNTHETIC = "SearchQA-Synthetic-v0"

PREMISES = {"oracle_gain": ("COSEARCH", "cpu-ranker", 0.10), "p1_share": ("CW-GRPO", "cpu-rounds", 0.70)}
"""Each method's premise as a bound on a signature number: the oracle ranker's relative F1 gain must reach
+10% (retrieval is a bottleneck a ranker can relieve), and the share of the search rounds of successful
trajectories with p = 1 must be at most 0.7 (rounds differ in contribution); with the setting built for it."""


def premises(results: dict[str, Any]) -> list[str]:
    """One line per premise measured (`PREMISES`): its number on each question set, against its bound."""
    lines = []
    for g in results["oracle_ranker"]:
        what, preset, bound = PREMISES["oracle_gain"]
        gain = math.nan if g["f1_relative_change"] is None else g["f1_relative_change"]
        verdict = "-" if math.isnan(gain) else "holds" if gain >= bound else "does not hold"
        lines.append(f"- {what} ({preset}): oracle-ranker F1 gain on {g['setting']}: "
                     f"{'-' if math.isnan(gain) else f'{gain:+.1%}'} (premise: >= {bound:+.0%}): {verdict}")
    for g in results["sampled"]:
        what, preset, bound = PREMISES["p1_share"]
        share = g["contribution_spread"]["contributing_share"]
        verdict = "-" if share is None or math.isnan(share) else "holds" if share <= bound else "does not hold"
        lines.append(f"- {what} ({preset}): share of the search rounds of successful trajectories with p = 1 on {g['setting']}: "
                     f"{_f(share)} of {g['contribution_spread']['rounds']} (premise: <= {bound:.2f}): {verdict}")
    return lines


def _f(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else "inf" if x == math.inf else f"{x:.{digits}f}"


def _describe(s: dict[str, Any]) -> str:
    """The analysed questions and env, in words."""
    model = s["model"].get("model", s["model"])
    if s.get("env_id", SYNTHETIC) != SYNTHETIC:
        held = "" if s.get("limit") is None else f" (of its first {s['limit']}, the training questions of its preset)"
        where = f"{s['questions']} questions of {s['data_path']}{held}, its own paragraphs"
    else:
        options = ", ".join(f"{k} {v}" for k, v in (s.get("env_options") or {}).items())
        where = (f"{s['questions']} {s.get('split', 'test')} questions of the synthetic world ({'/'.join(map(str, s['hops']))}-hop, "
                 f"{s['num_entities']} entities, world seed {s['world_seed']}{', ' + options if options else ''})")
    return f"Model {model}; {where}, {s['max_turns']} turns, {s['top_k']} document(s) shown."


def report(results: dict[str, Any]) -> str:
    """The premises measured (`premises`), then the tables of the analyses run, each under a caption with the
    paper's figure; one row (or block) per question set."""
    s = results["setting"]
    lines = [_describe(s), "", "Premises:", *premises(results)]
    if results["sampled"]:
        lines += [
            "",
            f"E-GRPO: questions where correct rollouts match more gold entities than wrong ones, over G={s['group']} rollouts at "
            f"temperature {s['temperature']} (paper: 1939 vs 487, about 4:1, over G=8)",
            "",
            "| setting | questions | sampled EM | correct > wrong | wrong > correct | ratio | ties | all right or all wrong (left out) | "
            "mean rate, correct | mean rate, wrong |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
    for g in results["sampled"]:
        ec = g["entity_contrast"]
        lines.append(f"| {g['setting']} | {g['questions']} | {_f(g['sampled_em'])} | {ec['correct_higher']} | {ec['wrong_higher']} | "
                     f"{_f(ec['ratio'], 2)} | {ec['ties']} | {ec['unmixed']} | {_f(ec['mean_rate_correct'])} | {_f(ec['mean_rate_wrong'])} |")
    for g in results["sampled"]:
        cs = g["contribution_spread"]
        lines += [
            "",
            f"CW-GRPO, {g['setting']}: contribution p = u*v (gold judge) over the search rounds of the {cs['trajectories']} successful "
            f"sampled trajectories (paper: concentrated in a few key rounds); share of rounds with p = 1: {_f(cs['contributing_share'])} "
            f"of {cs['rounds']}; {cs['no_search']} answered without searching",
            "",
            "| contributing rounds | trajectories |", "|---|---|",
            *[f"| {k} | {v} |" for k, v in cs["contributing"].items()],
            "",
            "| search rounds | trajectories |", "|---|---|",
            *[f"| {k} | {v} |" for k, v in cs["searches"].items()],
            "",
            "| round | rounds | share with p = 1 |", "|---|---|---|",
            *[f"| {j + 1} | {n} | {_f(share)} |" for j, (n, share) in enumerate(cs["by_position"])],
        ]
    if results["oracle_ranker"]:
        lines += [
            "",
            "COSEARCH: greedy EM/F1 with answer-bearing candidates moved to the top (oracle ranker) vs the retriever's order "
            "(paper: +14.7% F1 for a 7B agent, +26.8% for 3B)",
            "",
            "| setting | questions | pool / shown | answer in pool | answer shown (retriever -> oracle) | EM retriever | EM oracle | "
            "F1 retriever | F1 oracle | F1 change | relative |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
    for g in results["oracle_ranker"]:
        r, o = g["retriever"], g["oracle"]
        rel = g["f1_relative_change"]
        lines.append(f"| {g['setting']} | {g['questions']} | {g['candidates']} / {g['top_k']} | {_f(r['answer_in_pool'])} | "
                     f"{_f(r['answer_shown'])} -> {_f(o['answer_shown'])} | {_f(r['em'])} | {_f(o['em'])} | {_f(r['f1'])} | "
                     f"{_f(o['f1'])} | {g['f1_change']:+.3f} | {'-' if math.isnan(rel) else f'{rel:+.1%}'} |")
    if results.get("retrieval"):
        lines += ["", "Retrieval room (no model): the share of the oracle's searches whose gold passage the retriever ranks first, "
                      "and within the pool; all first: questions whose every search has it first", "",
                  "| setting | questions | pool | first, by search | in pool, by search | all first |", "|---|---|---|---|---|---|"]
    for g in results.get("retrieval", []):
        lines.append(f"| {g['setting']} | {g['questions']} | {g['candidates']} | {', '.join(map(_f, g['first']))} | "
                     f"{', '.join(map(_f, g['in_pool']))} | {_f(g['all_first'])} |")
    for g in results.get("retrieval", []):
        if "oracle_tokens" in g:
            t = g["oracle_tokens"]
            lines.append(f"\nOracle trajectories of {g['setting']}, response tokens: mean {t['mean']:.0f}, p90 {t['p90']:.0f}, max "
                         f"{t['max']:.0f}; {t['over_budget']:.0%} over the {s['max_response_tokens']}-token budget")
    return "\n".join(lines)
