"""CW-GRPO: contribution-weighted GRPO. How it differs from plain GRPO (`agents.learners.grpo`):

1. A judge labels every search round t of a trajectory with retrieval utility u and reasoning
   correctness v; p_t = u * v (read from step info, `info["episode"]["turn_labels"]`; never re-derived).
2. The outcome advantage A_i (GRPO's, unchanged) is split over rounds instead of being copied to every
   token: weights c_t = softmax over the search rounds of alpha * p_t when A_i >= 0, uniform
   1 / (T - 1) when A_i < 0 (a failed trajectory blames all its search rounds alike).
3. Search round t gets A_t = A_i * c_t * (T - 1), so the mean over search rounds is A_i: advantage moves
   between rounds, it is never created. The final answer round keeps A_i.
4. alpha = inf (the default, and what the official code uses; it treats alpha >= 10 as infinite) puts all
   weight on contributing rounds, c_t = p_t / sum(p); when no round contributes, every search round gets 0
   (the one case where the mean is not preserved: the answer round alone carries A_i).
5. Round advantages are broadcast to each round's tokens with the rollout's per-round token spans.
6. Defaults of the official runs (verl): a k3 KL of 0.001 to the starting policy (`kl_coef`, "low_var_kl"
   there) and dual clip at 3 (`clip_ratio_c`). They keep GRPO's clip-higher (0.2 / 0.28) where the official
   runs clip symmetrically at 0.2 (set `eps_high=0.2` for that).

Choices where the method's description is silent:
- "Search rounds" are all rounds before the answer, invalid actions included, with p = 0 for those (the
  judge does not label them). T - 1 is then the number of rounds before the answer, as in the method's
  T-round trajectory whose last round answers, and an invalid round is blamed like a useless search.
- A round whose labels are missing, pending or failed counts as p = 0.
- A trajectory that ran out of turns has no answer round: all its rounds are search rounds (the divisor
  is its number of rounds) and the mean over them is A_i.
- An over-long rollout may end with one round the env never saw (`agents.rollout.Trajectory.rounds` has
  one more span than `step_infos`): it is one more search round, with p = 0, of an unanswered trajectory.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agents.core import broadcast_round_advantages
from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.grpo import GRPOConfig
from agents.learners.registry import EnvNeeds, register_learner
from agents.learners.grpo import batch_advantages as grpo_batch_advantages
from searchgym.errors import BatchError, ConfigError
from searchgym.info import StepInfo, TurnLabels

logger = logging.getLogger(__name__)

__all__ = [
    "INFINITE_ALPHA",
    "batch_advantages",
    "CWGRPOConfig",
    "contribution_weights",
    "round_advantages",
    "round_contributions",
    "token_advantages",
    "trajectory_round_advantages",
]

INFINITE_ALPHA = 10.0
"""alpha at or above this is treated as infinite, as the official code does (exp(10) makes the softmax
all but hard already, and inf * 0 would be NaN)."""


@dataclass
class CWGRPOConfig(GRPOConfig):
    """GRPO's options plus the contribution temperature."""

    alpha: float = math.inf
    """Softmax sharpness over contribution labels; 0 spreads A_i evenly (GRPO), >= 10 means infinite."""
    kl_coef: float = 0.001
    """Weight of the k3 KL to the starting policy: 0.001, as in the official runs (0 trains KL-free)."""
    clip_ratio_c: float | None = 3.0
    """Dual clip at 3, verl's default, on which the official code runs (None turns it off)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.alpha >= 0:
            raise ConfigError(f"alpha must be >= 0 (0 = GRPO, inf = only contributing rounds), got {self.alpha}")


def contribution_weights(
    contributions: Sequence[int], outcome_advantage: float, alpha: float = math.inf
) -> list[float]:
    """c_t for each search round, from its contribution label p_t (0 or 1) and the sign of A_i.

    >>> contribution_weights([1, 0, 1], 0.5)
    [0.5, 0.0, 0.5]
    >>> contribution_weights([1, 0], -0.5)
    [0.5, 0.5]
    """
    if not alpha >= 0:
        raise ConfigError(f"alpha must be >= 0, got {alpha}")
    if any(p not in (0, 1) for p in contributions):
        raise BatchError(f"contribution labels must be 0 or 1, got {list(contributions)}")
    n = len(contributions)
    if n == 0:
        return []
    if outcome_advantage < 0:
        return [1.0 / n] * n
    if alpha >= INFINITE_ALPHA:
        total = sum(contributions)
        return [p / total if total else 0.0 for p in contributions]
    logits = [alpha * p for p in contributions]
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def round_advantages(
    outcome_advantage: float, contributions: Sequence[int], *, answered: bool = True, alpha: float = math.inf
) -> list[float]:
    """One advantage per round: the search rounds' A_i * c_t * (T - 1), then A_i for the answer round.

    `contributions` holds p_t for the search rounds only (the rounds before the answer); the result has
    `len(contributions) + answered` entries.

    >>> round_advantages(1.0, [1, 0])
    [2.0, 0.0, 1.0]
    """
    weights = contribution_weights(contributions, outcome_advantage, alpha)
    n = len(contributions)
    out = [outcome_advantage * c * n for c in weights]
    if answered:
        out.append(float(outcome_advantage))
    return out


def _p(labels: TurnLabels | None) -> int:
    if not labels or labels.get("failed") or labels.get("pending"):
        return 0
    return 1 if labels.get("contribution") == 1 else 0


def round_contributions(infos: Sequence[StepInfo]) -> tuple[list[int], bool]:
    """(p_t for each search round, whether the trajectory ends with an answer) from its step infos.

    Labels come from the episode summary's `turn_labels` when the last info has it (deferred judges
    only fill them there), else from each step's `labels`.
    """
    if not infos:
        raise BatchError("a trajectory needs at least one step info")
    episode = infos[-1].get("episode")
    labels: Sequence[TurnLabels | None]
    if episode is not None and len(episode.get("turn_labels", ())) == len(infos):
        labels = episode["turn_labels"]
    else:
        labels = [info.get("labels") for info in infos]
        if any(lab and lab.get("pending") for lab in labels):
            logger.warning(
                "pending judge labels without an episode summary count as p = 0; pass the episode's last step info"
            )
    answered = infos[-1].get("action") == "answer"
    search = labels[:-1] if answered else labels
    return [_p(lab) for lab in search], answered


def trajectory_round_advantages(
    infos: Sequence[StepInfo], outcome_advantage: float, alpha: float = math.inf
) -> list[float]:
    """One advantage per step of the trajectory (step infos in order), A_i being its GRPO advantage."""
    contributions, answered = round_contributions(infos)
    return round_advantages(outcome_advantage, contributions, answered=answered, alpha=alpha)


def token_advantages(
    trajectories: Sequence[Sequence[StepInfo]],
    outcome_advantages: Sequence[float] | torch.Tensor,
    spans: Sequence[Sequence[tuple[int, int]]],
    seq_len: int,
    alpha: float = math.inf,
) -> torch.Tensor:
    """Per-token advantages (B, T) for B trajectories: step infos, GRPO advantages (B,), and each
    trajectory's per-round token spans from the rollout (one (start, end) per step, plus possibly one
    trailing round the env never saw when the rollout ran over its token budget)."""
    advantages = [float(a) for a in outcome_advantages]
    if not len(advantages) == len(trajectories) == len(spans):
        raise BatchError(
            f"{len(advantages)} outcome advantages, {len(trajectories)} trajectories "
            f"and {len(spans)} span lists must match"
        )
    rounds = []
    for infos, a, row in zip(trajectories, advantages, spans):
        contributions, answered = round_contributions(infos) if infos else ([], False)
        if len(row) == len(infos) + 1 and not answered:
            contributions.append(0)  # the cut-off round of an over-long rollout
        rounds.append(round_advantages(a, contributions, answered=answered, alpha=alpha))
    return broadcast_round_advantages(rounds, spans, seq_len)


@register_learner("cw-grpo", config=CWGRPOConfig, needs=EnvNeeds(judge=True),
                  summary="GRPO advantages moved between search rounds by the judge's contribution labels")
def batch_advantages(trajectories: Sequence[Trajectory], config: CWGRPOConfig) -> LearnerBatch:
    """CW-GRPO targets: GRPO's outcome advantages, redistributed over each trajectory's rounds by the
    judge's contribution labels and broadcast to the rounds' tokens."""
    base = grpo_batch_advantages(trajectories, config)
    advantages = []
    contributing = rounds = 0
    positive: dict[int, list[float]] = {0: [], 1: []}
    for t, outcome in zip(trajectories, base.advantages):
        a = float(outcome[0]) if len(outcome) else 0.0
        advantages.append(token_advantages([t.step_infos], [a], [t.rounds], len(t.token_ids), alpha=config.alpha)[0])
        p, answered = round_contributions(t.step_infos) if t.step_infos else ([], False)
        contributing += sum(p)
        rounds += len(p)
        if a > 0:
            for label, value in zip(p, round_advantages(a, p, answered=answered, alpha=config.alpha)):
                positive[label].append(value)
    base.advantages = advantages
    base.metrics["cw_grpo/contributing_round_share"] = contributing / rounds if rounds else 0.0
    base.metrics.update(positive_round_metrics(positive))
    return base


def positive_round_metrics(positive: dict[int, list[float]]) -> dict[str, float]:
    """The search rounds of trajectories with a positive advantage, split by their contribution label:
    their mean advantage (`cw_grpo/adv_contributing`, `cw_grpo/adv_other`, present when such rounds exist)
    and their counts. GRPO would give both the trajectory's advantage; CW-GRPO moves it to the contributing
    rounds.

    >>> positive_round_metrics({1: [2.0, 1.0], 0: [0.0]})
    {'cw_grpo/rounds_contributing': 2.0, 'cw_grpo/rounds_other': 1.0, 'cw_grpo/adv_contributing': 1.5, 'cw_grpo/adv_other': 0.0}
    """
    out = {"cw_grpo/rounds_contributing": float(len(positive[1])), "cw_grpo/rounds_other": float(len(positive[0]))}
    if positive[1]:
        out["cw_grpo/adv_contributing"] = sum(positive[1]) / len(positive[1])
    if positive[0]:
        out["cw_grpo/adv_other"] = sum(positive[0]) / len(positive[0])
    return out
