"""The reference comparison's report: each seed's table, the signals, the learning check over seeds, the
paired checks question by question (`agents.experiments.paired`), and `results.md`, `results.json` and
`curves.png` under the run's `--out`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from agents.experiments.curves import plot_curves
from agents.experiments.paired import HEADER, RULE, paired_difference
from agents.experiments.presets import SFT, eval_questions_name
from agents.experiments.ranker_steps import ranker_hits_table
from agents.experiments.tool_calls import noncontributing_check, tool_call_check
from agents.train.metrics import SIGNALS


def _avg_columns(results: dict, names: list[str]) -> list[str]:
    """The Avg@k metric names any of these policies' evaluations report."""
    return sorted({k for n in names if n in results for k in results[n]["eval"] if k.startswith("eval/avg@") and k.endswith("/em")})


def seed_table(results: dict, learners: list[str]) -> str:
    """One seed's policies: test EM/F1 (greedy, and Avg@k when measured), searches, training reward, time, and the
    peak memory of the process that trained the learner (its own when each learner had a process of its own; a
    resumed learner's minutes count its earlier processes' RL steps, its peak is its last process's)."""
    names = [n for n in ("base", "start", *learners) if "eval" in results.get(n, {})]
    avg = _avg_columns(results, names)
    head = ["policy", "test EM", *[f"Avg@{k.split('@')[1].split('/')[0]} EM" for k in avg], "test F1", "searches/ep",
            "train reward (first -> last)", "minutes", "peak RSS (GB)"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    labels = {"base": "base (as released)", "start": "start (cold-started)"}
    for name in names:
        r = results[name]
        e = r["eval"]
        h = r.get("history")
        reward = f"{h[0]['rollout/reward']:.3f} -> {h[-1]['rollout/reward']:.3f}" if h and "rollout/reward" in h[0] else "-"
        minutes = f"{r['minutes']:.1f}" if "minutes" in r else "-"
        if "resumed_from_step" in r:  # its peak is the last process's, from that step on
            minutes += f" (resumed at step {r['resumed_from_step']})"
        peak = f"{r['peak_rss_gb']:.2f}" if "peak_rss_gb" in r else "-"
        cells = [labels.get(name, name), f"{e['eval/em']:.3f}", *[f"{e[k]:.3f}" if k in e else "-" for k in avg],
                 f"{e['eval/f1']:.3f}", f"{e['eval/searches']:.2f}", reward, minutes, peak]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def signal_table(results: dict, learners: list[str]) -> str:
    """Per learner, its signal metrics averaged over its RL steps (`agents.train.metrics.SIGNALS`); a dash
    where a learner does not report one."""
    keys = [k for k in SIGNALS if any(k in results[n].get("signals", {}) for n in learners)]
    lines = ["| learner | " + " | ".join(SIGNALS[k] for k in keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name in learners:
        sig = results[name].get("signals", {})
        lines.append(f"| {name} | " + " | ".join(f"{sig[k]:.2f}" if k in sig else "-" for k in keys) + " |")
    return "\n".join(lines)


def hotpotqa_table(results: dict, learners: list[str]) -> str:
    """The HotpotQA evaluation of the start policy and each learner's final policy."""
    n = int(results["start"]["hotpotqa"]["hotpotqa/questions"])
    lines = [f"HotpotQA (greedy, first {n} questions of the file):", "", "| policy | EM | F1 | searches/ep |", "|---|---|---|---|"]
    for name in ["start", *learners]:
        h = results[name]["hotpotqa"]
        lines.append(f"| {name} | {h['hotpotqa/em']:.3f} | {h['hotpotqa/f1']:.3f} | {h['hotpotqa/searches']:.2f} |")
    return "\n".join(lines)


def learning_check(per_seed: dict[int, dict], learners: list[str], eval_questions: int) -> str:
    """The learning check over seeds: each learner's test EM against the base and the cold-started policy.

    Run-to-run noise is the sample standard deviation over seeds of a policy's test EM (the same recipe
    with another seed: other question order, sampling and cold-start batches); with one seed only the
    binomial standard error of an EM measured on `eval_questions` questions is available. A rise is
    above the noise when it exceeds twice the standard error of the difference of the two means
    (sqrt(SE_a^2 + SE_b^2), each SE the std over seeds / sqrt(seeds), or the binomial SE with one seed):
    the same two-SE rule as `paired_check`, which pairs questions and so is the sharper test where
    per-question results exist. A run without a base evaluation (`Preset.eval_base` False) shows dashes
    in the base columns.
    """
    seeds = sorted(per_seed)
    names = [n for n in ["base", "start", *learners] if all(n in per_seed[s] for s in seeds)]
    em = {name: np.array([per_seed[s][name]["eval"]["eval/em"] for s in seeds]) for name in names}

    def noise(values: np.ndarray) -> float:
        if len(values) > 1:
            return float(values.std(ddof=1))
        p = float(values[0])
        return float(np.sqrt(max(p * (1 - p), 1e-12) / eval_questions))

    kind = f"std over {len(seeds)} seeds" if len(seeds) > 1 else f"binomial SE on {eval_questions} questions"
    header = (f"| policy | test EM per seed ({', '.join(map(str, seeds))}) | mean | noise ({kind}) | "
              "rise over base | above base noise? | rise over start | above start noise? |")
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    def se(values: np.ndarray) -> float:
        return noise(values) / np.sqrt(len(values)) if len(values) > 1 else noise(values)

    def rise(values: np.ndarray, reference: np.ndarray) -> str:
        delta = values.mean() - reference.mean()
        return f" {delta:+.3f} | {'yes' if delta > 2 * np.hypot(se(values), se(reference)) else 'no'} |"

    for name in names:
        v = em[name]
        row = f"| {name} | {', '.join(f'{x:.3f}' for x in v)} | {v.mean():.3f} | {noise(v):.3f} |"
        row += " - | - |" if name == "base" or "base" not in em else rise(v, em["base"])
        row += " - | - |" if name in ("base", "start") else rise(v, em["start"])
        lines.append(row)
    return "\n".join(lines)


def paired_check(per_seed: dict[int, dict], learners: list[str], against: str = "start", key: str = "eval_em") -> str | None:
    """Each learner against the cold-started policy it started from (or against the learner `against`, trained
    with the same seed from the same start), question by question.

    Per seed, the difference of test EMs on the same questions (paired). Two standard errors of their mean
    are shown: over questions (each question's difference averaged over the seeds first, since every seed
    is scored on the same questions and their differences are not independent across seeds: evaluation
    noise) and over seeds (std of the per-seed differences / sqrt(seeds): training noise). A rise is beyond
    noise when it exceeds twice the larger of the two (`agents.experiments.paired`). `key` "eval_avg_em" pairs the
    per-question means of the Avg@k samples instead (runs with `--eval-samples`). None when the results
    carry no such per-question values.
    """
    seeds = sorted(per_seed)
    learners = [n for n in learners if n != against]
    if not learners or not all(key in per_seed[s].get(n, {}) for s in seeds for n in [against, *learners]):
        return None
    what = "EM" if key == "eval_em" else "Avg@k EM"
    lines = [f"| learner | {what} - {against} per seed ({', '.join(map(str, seeds))}) | {HEADER}", RULE]
    for name in learners:
        d = paired_difference([np.asarray(per_seed[s][name][key], float) - np.asarray(per_seed[s][against][key], float)
                               for s in seeds])
        lines.append(f"| {name} | " + " | ".join(d.cells()) + " |")
    return "\n".join(lines)


def paired_sections(per_seed: dict[int, dict], learners: list[str], eval_samples: int | None = None) -> str:
    """The report's paired tables, each under its question: every policy against the cold start; each RL
    learner against GRPO (what its own reward, weighting or loss settings changed); each RL learner against
    the supervised control when it ran (whether RL beats as many more steps of imitation); and, with Avg@k
    samples, every policy against the cold start on them. Tables without per-question results are left out."""
    sections = [("Paired against the cold start (same questions, per seed)", paired_check(per_seed, learners))]
    rl = [n for n in learners if n != SFT]
    if "grpo" in rl:
        sections.append(("Paired against GRPO (same seed, start and questions): what each learner's own reward, "
                         "weighting or loss settings changed", paired_check(per_seed, rl, against="grpo")))
        sections.append(("Searches per episode against GRPO (same seed, start and questions; E-GRPO's claim: fewer tool "
                         "calls at equal or better EM)", tool_call_check(per_seed, rl, against="grpo")))
        sections.append(("Searches the judge labelled as not contributing, per episode, against GRPO (same seed, start and "
                         "questions; CW-GRPO's mechanism: no credit for such rounds of a successful trajectory)",
                         noncontributing_check(per_seed, rl, against="grpo")))
    sections.append(("Searches the judge labelled as not contributing, per episode, against the cold start (same "
                     "questions, per seed; whether training changed how often the policy makes such searches at all)",
                     noncontributing_check(per_seed, rl, against="start")))
    if SFT in learners and rl:
        sections.append(("Paired against the supervised control (same seed, start and questions, as many update steps): "
                         "whether RL beats more imitation", paired_check(per_seed, rl, against=SFT)))
    sections.append((f"Paired against the cold start on Avg@{eval_samples} (each question's mean EM over its {eval_samples} "
                     "samples at the rollout temperature: the sampling policy RL trains)",
                     paired_check(per_seed, learners, key="eval_avg_em")))
    return "".join(f"\n\n{title}:\n\n{table}" for title, table in sections if table)


def credit_report(results: dict, out: Path) -> str:
    """A seed's credit view (`agents.experiments.credit`) drawn as `out/credit.png`, and its section of
    `results.md` ("" for a run without one)."""
    if "credit" not in results:
        return ""
    from agents.experiments.credit_plot import plot_credit
    from agents.experiments.credit_report import credit_section

    plot_credit(results["credit"], out / "credit.png")
    return "\n" + credit_section(results["credit"]) + "\n"


def write_report(per_seed: dict[int, dict], learners: list[str], preset: dict, steps: int, out: Path, hotpotqa: str | None = None) -> str:
    """results.md, results.json, curves.png and (with a credit view) credit.png under `out`, for the first seed
    and the learning check over all; returns the learning check's tables."""
    seeds = list(per_seed)
    check = (f"Scored on {preset['eval_questions']} {eval_questions_name(preset)}.\n\n"
             + learning_check(per_seed, learners, preset["eval_questions"]) + paired_sections(per_seed, learners, preset.get("eval_samples")))
    hits = ranker_hits_table(per_seed) if "cosearch" in learners else None
    if hits:
        check += "\n\nCOSEARCH's ranker, Hit@1 against the retriever's at each RL step (ranker / retriever):\n\n" + hits
    options = preset.get("learner_options") or {}
    if options:
        check += "\n\nLearner options: " + "; ".join(f"{n}: " + ", ".join(f"{k}={v}" for k, v in o.items()) for n, o in options.items())
    first = seeds[0]
    plot_curves(per_seed[first], learners, out / "curves.png")
    report = (seed_table(per_seed[first], learners) + "\n\nSignals (mean over RL steps):\n\n" + signal_table(per_seed[first], learners)
              + "\n\nLearning check (test EM):\n\n" + check + "\n")
    if hotpotqa:
        report += "\n" + hotpotqa_table(per_seed[first], learners) + "\n"
    report += credit_report(per_seed[first], out)
    (out / "results.md").write_text(report)
    (out / "results.json").write_text(json.dumps({"preset": preset, "steps": steps, "seeds": seeds,
                                                  "results": {str(s): r for s, r in per_seed.items()}}, indent=2))
    return check


