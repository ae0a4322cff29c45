"""The signature analyses of `agents.experiments.signatures`, as pure functions: plain inputs in, numbers out.

1. `entity_contrast` (E-GRPO): per group of G rollouts, is the correct rollouts' mean entity match rate
   higher than the wrong ones'?
2. `contribution_spread` (CW-GRPO): how contribution p = u * v spreads over the search rounds of
   successful trajectories.
3. `f1_gain`, `search_hits` (COSEARCH): what the oracle ranker adds over the retriever's order, and how often
   a search's pool and its shown documents hold the answer; `retrieval_room`: where the retriever ranks the
   passage each oracle search is after (no model).

The readers in between (`episode_em`, `episode_entity_rate`, `search_contributions`, `group_outcomes`,
`successful_rounds`) take rollouts' step infos (`searchgym.info`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.errors import ConfigError

TIE = 1e-9
"""Two mean entity rates closer than this are a tie (rates are ratios of small counts, averaged)."""


# -- 1. E-GRPO: entity match rate of correct vs wrong rollouts ----------------------------------------------

@dataclass(frozen=True)
class EntityContrast:
    """Per question, the mean entity match rate of its correct rollouts against its wrong ones."""

    questions: int
    """Questions analysed (groups), mixed or not."""
    correct_higher: int
    """Mixed questions whose correct rollouts have the higher mean rate."""
    wrong_higher: int
    """Mixed questions whose wrong rollouts have the higher mean rate."""
    ties: int
    """Mixed questions whose two means are equal."""
    unmixed: int
    """Questions whose rollouts are all correct or all wrong: no contrast, left out of the counts above."""
    mean_rate_correct: float
    """Mean over mixed questions of their correct rollouts' mean rate (nan with no mixed question)."""
    mean_rate_wrong: float
    """The same for wrong rollouts."""

    @property
    def ratio(self) -> float:
        """correct_higher / wrong_higher: inf when only correct rollouts are ever ahead, nan when neither is."""
        if self.wrong_higher:
            return self.correct_higher / self.wrong_higher
        return math.inf if self.correct_higher else math.nan


def entity_contrast(groups: Sequence[Sequence[tuple[float, float]]]) -> EntityContrast:
    """`groups`: per question, one (EM, entity match rate) pair per rollout; EM 1 is correct."""
    higher = lower = ties = unmixed = 0
    correct_means, wrong_means = [], []
    for group in groups:
        correct = [rate for em, rate in group if em >= 1.0]
        wrong = [rate for em, rate in group if em < 1.0]
        if not correct or not wrong:
            unmixed += 1
            continue
        c, w = sum(correct) / len(correct), sum(wrong) / len(wrong)
        correct_means.append(c)
        wrong_means.append(w)
        if abs(c - w) <= TIE:
            ties += 1
        elif c > w:
            higher += 1
        else:
            lower += 1
    return EntityContrast(len(groups), higher, lower, ties, unmixed, mean_or_nan(correct_means), mean_or_nan(wrong_means))


# -- 2. CW-GRPO: contribution over the search rounds of successful trajectories ----------------------------

@dataclass(frozen=True)
class ContributionSpread:
    """How contribution p = u * v falls on the search rounds of successful trajectories."""

    trajectories: int
    """Successful trajectories with at least one search round."""
    no_search: int
    """Successful trajectories that answered without searching (left out of everything else)."""
    rounds: int
    """Search rounds of the trajectories counted."""
    contributing_share: float
    """Share of those rounds with p = 1 (nan without rounds)."""
    contributing: dict[int, int]
    """Histogram: number of contributing rounds in a trajectory -> trajectories."""
    searches: dict[int, int]
    """Histogram: number of search rounds in a trajectory -> trajectories."""
    by_position: list[tuple[int, float]]
    """For the 1st, 2nd, ... search round: (rounds at that position, share of them with p = 1)."""


def contribution_spread(rounds: Sequence[Sequence[int]]) -> ContributionSpread:
    """`rounds`: for each successful trajectory, p (0 or 1) of each of its search rounds, in order."""
    searched = [list(r) for r in rounds if r]
    flat = [p for r in searched for p in r]
    depth = max((len(r) for r in searched), default=0)
    by_position = []
    for j in range(depth):
        at = [r[j] for r in searched if len(r) > j]
        by_position.append((len(at), sum(at) / len(at)))
    return ContributionSpread(
        trajectories=len(searched), no_search=len(rounds) - len(searched), rounds=len(flat),
        contributing_share=sum(flat) / len(flat) if flat else math.nan,
        contributing=dict(sorted(Counter(sum(r) for r in searched).items())),
        searches=dict(sorted(Counter(len(r) for r in searched).items())), by_position=by_position)


# -- reading rollouts (step infos, `searchgym.info`) -------------------------------------------------------

def episode_em(step_infos: Sequence[Mapping[str, Any]]) -> float:
    """The episode's EM; 0 for an episode that never ended in the env (an over-long rollout)."""
    episode = step_infos[-1].get("episode") if step_infos else None
    return float(episode.get("em", 0.0)) if episode else 0.0


def episode_entity_rate(step_infos: Sequence[Mapping[str, Any]]) -> float:
    """gamma: the episode's `entity_rate`, else the last step's running rate (over-long rollouts), else 0."""
    if not step_infos:
        return 0.0
    episode = step_infos[-1].get("episode")
    if episode and episode.get("entity_rate") is not None:
        return float(episode["entity_rate"])
    entities = step_infos[-1].get("entities")
    return float(entities["rate"]) if entities else 0.0


def search_contributions(step_infos: Sequence[Mapping[str, Any]]) -> list[int]:
    """p of each search round (steps whose action is `search`), in order. Labels come from the episode's
    `turn_labels` when it has one per step (deferred judges fill them only there), else from each step;
    an unlabelled or failed round counts as p = 0."""
    episode = step_infos[-1].get("episode") if step_infos else None
    labels = episode["turn_labels"] if episode and len(episode.get("turn_labels") or ()) == len(step_infos) else \
        [info.get("labels") for info in step_infos]
    return [int(bool(lab and lab.get("contribution"))) for info, lab in zip(step_infos, labels) if info.get("action") == "search"]


def group_outcomes(trajectories: Sequence[Any], group: int) -> list[list[tuple[float, float]]]:
    """Group-major trajectories (`group` per question) as `entity_contrast`'s (EM, rate) groups."""
    if group < 1 or len(trajectories) % group:
        raise ConfigError(f"{len(trajectories)} trajectories do not split into groups of {group}")
    pairs = [(episode_em(t.step_infos), episode_entity_rate(t.step_infos)) for t in trajectories]
    return [pairs[i:i + group] for i in range(0, len(pairs), group)]


def successful_rounds(trajectories: Sequence[Any]) -> list[list[int]]:
    """`contribution_spread`'s input: the search rounds' p of each trajectory with EM 1."""
    return [search_contributions(t.step_infos) for t in trajectories if episode_em(t.step_infos) >= 1.0]


# -- 3. COSEARCH: the oracle ranker ------------------------------------------------------------------------

def f1_gain(retriever_f1: float, oracle_f1: float) -> tuple[float, float]:
    """(absolute, relative) change of F1 from the retriever's order to the oracle's; relative is nan when
    the retriever's F1 is 0."""
    delta = oracle_f1 - retriever_f1
    return delta, delta / retriever_f1 if retriever_f1 > 0 else math.nan


def search_hits(trajectories: Sequence[Any], pool_holds_answer: Callable[[str, list[str]], bool],
                shown_holds_answer: Callable[[str, list[str]], bool]) -> dict[str, float]:
    """Over every search step: the share whose candidate pool holds a gold answer, and the share whose shown
    documents do. The callables take (question id, document ids) and say whether any holds an answer."""
    pool = shown = searches = 0
    for t in trajectories:
        for info in t.step_infos:
            if info.get("action") != "search" or not info.get("candidates"):
                continue
            searches += 1
            pool += pool_holds_answer(info["question_id"], info["candidates"]["ids"])
            shown += shown_holds_answer(info["question_id"], [d["id"] for d in info["shown"]])
    return {"searches": float(searches), "answer_in_pool": pool / searches if searches else math.nan,
            "answer_shown": shown / searches if searches else math.nan}



@dataclass(frozen=True)
class RetrievalRoom:
    """Where the retriever puts the passage each of the oracle's searches is after (no model involved)."""

    questions: int
    first: list[float]
    """For the 1st, 2nd, ... search: the share whose target passage the retriever ranks first."""
    in_pool: list[float]
    """The same for: the target passage is within the candidate pool."""
    all_first: float
    """The share of questions whose every search has its target first: what a policy that reads only the
    first document can answer at best (nan without questions)."""


def retrieval_room(rows: Sequence[Sequence[tuple[bool, bool]]]) -> RetrievalRoom:
    """`rows`: per question, (target first, target in the pool) of each of its oracle searches, in order."""
    depth = max((len(r) for r in rows), default=0)
    first = [mean_or_nan([float(r[j][0]) for r in rows if len(r) > j]) for j in range(depth)]
    pool = [mean_or_nan([float(r[j][1]) for r in rows if len(r) > j]) for j in range(depth)]
    return RetrievalRoom(len(rows), first, pool, mean_or_nan([float(all(f for f, _ in r)) for r in rows]))


def mean_or_nan(values: Sequence[float]) -> float:
    """The mean, or nan for no values (a table shows it as a dash)."""
    return sum(values) / len(values) if values else math.nan
