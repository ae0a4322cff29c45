"""Tool calls paired question by question: E-GRPO's second claim, fewer searches than GRPO at equal or better
EM, checked like the learning check's EM pairings (`agents.experiments.paired`).

Per seed, each question's greedy searches under a learner minus under the policy it is compared with
(GRPO, trained with the same seed from the same start), beside the same pairing of EM. A learner "uses
fewer searches" when the mean difference is below minus twice the larger standard error (over questions,
over seeds), "more" when above twice it; the claim holds when it uses fewer and its EM is not worse beyond
noise.

>>> seed = {"grpo": {"eval_em": [1.0, 0.0], "eval_searches": [2.0, 3.0]},
...         "e-grpo": {"eval_em": [1.0, 0.0], "eval_searches": [2.0, 2.0]}}
>>> search, em = searches_against({0: seed}, "e-grpo", "grpo")
>>> search.per_seed, em.per_seed, search.down
([-0.5], [0.0], [1])

The same pairing of the searches the env's judge labelled as not contributing (a greedy episode's searches
minus its contributing ones, `eval_contributing`) shows CW-GRPO's mechanism on the test questions: it gives no
credit to the rounds of a successful trajectory that did not contribute, so where it works they should become
fewer than under GRPO.
"""

from __future__ import annotations

import math

import numpy as np

from agents.experiments.paired import PairedDifference, paired_difference

NONCONTRIBUTING = "eval_noncontributing"
"""A derived per-question result: `eval_searches` minus `eval_contributing`."""


def per_question(entry: dict, key: str) -> list[float] | None:
    """A policy entry's per-question results under `key` (`NONCONTRIBUTING` derived); None when not kept."""
    if key == NONCONTRIBUTING:
        searches, contributing = entry.get("eval_searches"), entry.get("eval_contributing")
        return None if searches is None or contributing is None else [s - c for s, c in zip(searches, contributing, strict=True)]
    return entry.get(key)


def searches_against(per_seed: dict[int, dict], learner: str, against: str,
                     key: str = "eval_searches") -> tuple[PairedDifference, PairedDifference]:
    """(searches under `key`, EM) of `learner` minus `against`, paired per seed and question."""
    seeds = sorted(per_seed)

    def diff(key: str) -> PairedDifference:
        return paired_difference([np.asarray(per_question(per_seed[s][learner], key), float)
                                  - np.asarray(per_question(per_seed[s][against], key), float) for s in seeds])

    return diff(key), diff("eval_em")


def search_verdict(d: PairedDifference) -> str:
    """`fewer` or `more` searches beyond noise, else `no`."""
    return "fewer" if d.mean < -d.bound else "more" if d.mean > d.bound else "no"


def tool_call_check(per_seed: dict[int, dict], learners: list[str], against: str = "grpo") -> str | None:
    """Each learner's greedy searches per episode against `against`'s, with the EM pairing beside it; None when
    a seed lacks either's per-question searches (runs made before they were kept)."""
    return _against_table(per_seed, learners, against, "eval_searches", "searches/ep", "fewer searches, EM not worse?")


def noncontributing_check(per_seed: dict[int, dict], learners: list[str], against: str = "grpo") -> str | None:
    """Each learner's greedy searches per episode that the judge labelled as not contributing, against
    `against`'s, with the EM pairing beside it; None when a seed lacks the labels' counts (runs made before
    they were kept, or envs without a judge)."""
    return _against_table(per_seed, learners, against, NONCONTRIBUTING, "non-contributing searches/ep",
                          "fewer such searches, EM not worse?")


def _against_table(per_seed: dict[int, dict], learners: list[str], against: str, key: str, what: str, claim: str) -> str | None:
    seeds = sorted(per_seed)
    learners = [n for n in learners if n != against]
    if not learners or not all(per_question(per_seed[s].get(n, {}), k) is not None
                               for s in seeds for n in [against, *learners] for k in (key, "eval_em")):
        return None
    lines = [f"| learner | {what} - {against} per seed ({', '.join(map(str, seeds))}) | mean | SE over questions | "
             f"SE over seeds | fewer beyond noise? | questions fewer/more per seed | EM - {against} mean | EM beyond noise? | "
             f"{claim} |", "|---" * 10 + "|"]
    for name in learners:
        search, em = searches_against(per_seed, name, against, key)
        verdict = search_verdict(search)
        holds = "yes" if verdict == "fewer" and em.verdict != "worse" else "no"
        lines.append(f"| {name} | {', '.join(f'{x:+.3f}' for x in search.per_seed)} | {search.mean:+.3f} | {search.se_questions:.3f} | "
                     f"{'-' if math.isnan(search.se_seeds) else f'{search.se_seeds:.3f}'} | {verdict} | "
                     f"{', '.join(f'{d}/{u}' for u, d in zip(search.up, search.down))} | {em.mean:+.3f} | {em.verdict} | {holds} |")
    return "\n".join(lines)
