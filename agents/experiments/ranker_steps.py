"""COSEARCH's ranker step by step: its Hit@1 against the retriever's at every RL step of every seed, from the
learner's history (`ranker/hit@1`, `ranker/retriever_hit@1`: over the step's ranker calls whose candidates
hold a gold answer). COSEARCH's signature is a ranker that puts a useful document first where the retriever
does not: the ranker's Hit@1 above the retriever's by the last steps. Where the learner's evaluation scored
its ranker (`agents.train.evaluate.ranker_eval_metrics`), the same comparison on the test questions' greedy
episodes closes each row.

>>> history = [{"ranker/hit@1": 0.5, "ranker/retriever_hit@1": 0.5}, {"ranker/hit@1": 0.9, "ranker/retriever_hit@1": 0.6}]
>>> print(ranker_hits_table({0: {"cosearch": {"history": history}}}, last=1))
| seed | step 1 | step 2 | last 1 step(s): ranker - retriever |
|---|---|---|---|
| 0 | 0.50 / 0.50 | 0.90 / 0.60 | +0.300 |
"""

from __future__ import annotations

import numpy as np

HIT, RETRIEVER_HIT = "ranker/hit@1", "ranker/retriever_hit@1"
EVAL_HIT, EVAL_RETRIEVER_HIT, EVAL_KEPT = "eval/ranker_hit@1", "eval/retriever_hit@1", "eval/ranker_kept_order_rate"


def _cell(step: dict) -> str:
    return f"{step[HIT]:.2f} / {step[RETRIEVER_HIT]:.2f}" if HIT in step and RETRIEVER_HIT in step else "-"


def ranker_hits_table(per_seed: dict[int, dict], learner: str = "cosearch", last: int = 3) -> str | None:
    """Per seed, "ranker / retriever" Hit@1 at each RL step, the mean of ranker minus retriever over the last
    `last` steps that report both, and, when an evaluation scored the ranker, the same on the test questions
    (with the share of its valid calls that kept the retriever's order, where recorded); None when no seed
    trained `learner`."""
    seeds = [s for s in sorted(per_seed) if per_seed[s].get(learner, {}).get("history")]
    if not seeds:
        return None
    steps = max(len(per_seed[s][learner]["history"]) for s in seeds)
    test = any(EVAL_HIT in per_seed[s][learner].get("eval", {}) for s in seeds)
    head = [f"step {i + 1}" for i in range(steps)] + [f"last {last} step(s): ranker - retriever"]
    if test:
        head.append("test questions (greedy): ranker / retriever (answerable calls, kept order)")
    lines = ["| seed | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for s in seeds:
        entry = per_seed[s][learner]
        history = entry["history"]
        both = [h for h in history if HIT in h and RETRIEVER_HIT in h][-last:]
        gap = f"{np.mean([h[HIT] - h[RETRIEVER_HIT] for h in both]):+.3f}" if both else "-"
        cells = [_cell(h) for h in history] + ["-"] * (steps - len(history)) + [gap]
        if test:
            e = entry.get("eval", {})
            kept = f", {e[EVAL_KEPT]:.2f}" if EVAL_KEPT in e else ""
            cells.append(f"{e[EVAL_HIT]:.2f} / {e[EVAL_RETRIEVER_HIT]:.2f} ({e['eval/ranker_answerable_calls']:.0f}{kept})" if EVAL_HIT in e else "-")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
