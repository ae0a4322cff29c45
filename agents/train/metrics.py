"""Training metrics: what a step reports, and the `metrics.jsonl` (+ TensorBoard) log that a resumed run
keeps at one line per step. A failed write of `metrics.jsonl` (disk full, permissions) is a `MetricsError`
naming the file: the run stops before the step's checkpoint, so running the same command again once the
cause is fixed resumes from the previous checkpoint and logs the step again."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import torch

from agents.learners.batch import LearnerBatch
from agents.rollout import rollout_metrics
from agents.train.distributed import all_reduce_sum
from agents.train.tb import log_tensorboard
from agents.train.update import UpdateStats
from searchgym.errors import SearchGymError

logger = logging.getLogger(__name__)


class MetricsError(SearchGymError):
    """`metrics.jsonl` cannot be read or written; names the file and the cause."""


def episode_summaries(trajectories) -> list[dict]:
    """Each trajectory's episode summary (`info["episode"]`), or {} when it has none."""
    return [t.step_infos[-1].get("episode", {}) if t.step_infos else {} for t in trajectories]


def contributing_searches(summary: dict) -> int | None:
    """The search rounds of an episode (its summary, `info["episode"]`) that its judge labelled as contributing
    (contribution 1, not failed: CW-GRPO's p_t = 1); None when it searched and a search turn has no labels.

    >>> judged = {"retrieval_utility": 1, "contribution": 1, "failed": False}
    >>> contributing_searches({"searches": 2, "turn_labels": [judged, {**judged, "contribution": 0}, None]})
    1
    >>> contributing_searches({"searches": 1, "turn_labels": [None, None]}) is None
    True
    """
    labels = summary.get("turn_labels") or []
    judged = [lab for lab in labels if lab is not None and lab.get("contribution") is not None and not lab.get("pending")]
    if summary.get("searches", 0) and not judged and not any(lab is not None and lab.get("failed") for lab in labels):
        return None
    return sum(lab["contribution"] == 1 and not lab.get("failed") for lab in judged)


def noncontributing_searches_mean(summaries: list[dict]) -> float | None:
    """Mean over episodes of the searches their judge did not label as contributing (`contributing_searches`);
    None when an episode searched without labels (an env without a judge).

    >>> judged = {"retrieval_utility": 1, "contribution": 1, "failed": False}
    >>> noncontributing_searches_mean([{"searches": 2, "turn_labels": [judged, {**judged, "contribution": 0}, None]}, {"searches": 0}])
    0.5
    """
    contributing = [contributing_searches(s) for s in summaries]
    if not contributing or None in contributing:
        return None
    return float(np.mean([s.get("searches", 0) - c for s, c in zip(summaries, contributing, strict=True)]))


def step_rollout_metrics(trajectories, targets: LearnerBatch) -> dict[str, float]:
    """The rollout engine's batch statistics plus what only the env's episode summaries and the learner know."""
    summaries = episode_summaries(trajectories)
    rates = [s.get("entity_rate") for s in summaries if s.get("entity_rate") is not None]
    noncontributing = noncontributing_searches_mean(summaries)
    return {
        **rollout_metrics(trajectories),
        "rollout/reward": float(np.mean(targets.rewards)),
        "rollout/em": float(np.mean([s.get("em", 0.0) for s in summaries])),
        "rollout/f1": float(np.mean([s.get("f1", 0.0) for s in summaries])),
        "rollout/entity_rate": float(np.mean(rates)) if rates else 0.0,
        "rollout/sampled_tokens": float(sum(t.num_sampled_tokens for t in trajectories)),
        "rollout/included": float(sum(targets.include)),
        "signal/zero_advantage_groups": zero_advantage_group_share(trajectories, targets),
        # CW-GRPO's mechanism in training, for every learner: searches the env's judge saw contribute nothing.
        **({"rollout/noncontributing_searches_mean": noncontributing} if noncontributing is not None else {}),
    }


SIGNALS: dict[str, str] = {
    "signal/zero_advantage_groups": "zero-adv groups",
    "rollout/searches_mean": "searches/ep",
    "rollout/entity_rate": "entity rate",
    "rollout/end/format_error": "format errors",
    "rollout/end/over_long": "over-long",
    "cw_grpo/adv_contributing": "A contributing rounds",
    "cw_grpo/adv_other": "A other rounds",
    "e_grpo/partial_credit_only_groups": "partial-credit-only groups",
    "ranker/valid_rate": "ranker valid",
    "ranker/hit@1": "ranker Hit@1",
    "ranker/retriever_hit@1": "retriever Hit@1",
    "ranker/kept_order_rate": "ranker kept order",
}
"""The metrics that say whether a step's rollouts could teach the learner anything, with their short
labels: the shared ones first, then each learner's own (present only in that learner's steps)."""


def signal_summary(metrics: dict[str, float]) -> dict[str, str]:
    """The signal metrics present in one step's `metrics`, by label, formatted for a progress bar.

    >>> signal_summary({"signal/zero_advantage_groups": 0.5, "ranker/valid_rate": 1.0, "loss/policy": 0.1})
    {'zero-adv groups': '0.50', 'ranker valid': '1.00'}
    """
    return {label: f"{metrics[key]:.2f}" for key, label in SIGNALS.items() if key in metrics and key.startswith(("signal/", "cw_grpo/", "e_grpo/", "ranker/"))}


def zero_advantage_group_share(trajectories, targets: LearnerBatch) -> float:
    """Share of the step's groups that teach nothing: every member's advantage is zero on every token, or
    the member is left out of the loss (a group of equal rewards under GRPO, a group dropped by dynamic
    sampling). The rest of the step's rollouts carry the whole gradient.

    >>> import torch
    >>> from types import SimpleNamespace as T
    >>> rollouts = [T(group=0), T(group=0), T(group=1), T(group=1)]
    >>> flat = LearnerBatch([torch.zeros(3), torch.zeros(3), torch.ones(3), -torch.ones(3)], [True] * 4, [1.0, 1.0, 1.0, 0.0])
    >>> zero_advantage_group_share(rollouts, flat)
    0.5
    """
    silent: dict[int, bool] = {}
    for t, advantage, included in zip(trajectories, targets.advantages, targets.include):
        quiet = not included or not bool(torch.count_nonzero(advantage))
        silent[t.group] = silent.get(t.group, True) and quiet
    return sum(silent.values()) / len(silent) if silent else 0.0


def global_stats(accelerator, local: UpdateStats, total_tokens: float) -> UpdateStats:
    """The step's update stats over every rank from one rank's share (see `policy_gradient_step`)."""
    t = local.loss_tokens
    loss, kl, has_kl, high, low, ratio = all_reduce_sum(accelerator, [
        local.loss, local.kl or 0.0, float(local.kl is not None), local.clip_frac_high * t, local.clip_frac_low * t, local.ratio_mean * t])
    if not total_tokens:
        return UpdateStats(0.0, None, 0.0, 0.0, 1.0, 0)
    return UpdateStats(loss=loss, kl=kl if has_kl else None, clip_frac_high=high / total_tokens, clip_frac_low=low / total_tokens,
                       ratio_mean=ratio / total_tokens, loss_tokens=int(total_tokens))


class MetricsLog:
    """`out/metrics.jsonl`, one JSON line per step, and optionally TensorBoard events under `out/tb`."""

    def __init__(self, out: Path, tensorboard: bool = False):
        self.path = out / "metrics.jsonl"
        self.out, self.tensorboard = out, tensorboard
        self._tb = None

    def write(self, metrics: dict[str, float], step: int) -> None:
        # metrics.jsonl first: TensorBoard is an optional second copy that may fail (`agents.train.tb`).
        try:
            with open(self.path, "a") as f:
                f.write(json.dumps(metrics) + "\n")
        except OSError as e:
            raise self._error("write", e) from e
        if self.tensorboard:
            self.step = step
            log_tensorboard(self, metrics)

    def drop_after(self, step: int) -> None:
        """Drop lines of steps after checkpoint `step` (logged, then the process died before the checkpoint
        was written) and lines cut short by a crash: the resumed run logs those steps again, and each step
        must have exactly one line."""
        if not self.path.exists():
            return
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as e:
            raise self._error("read", e) from e
        kept = []
        for line in lines:
            try:
                logged = int(json.loads(line)["step"])
            except (ValueError, KeyError, TypeError):
                continue
            # Step 0 is the cold start, which a run without any checkpoint does again.
            if step > 0 and logged <= step:
                kept.append(line)
        if len(kept) != len(lines):
            logger.info("dropping %d metrics line(s) written after the checkpoint of step %d", len(lines) - len(kept), step)
            tmp = self.path.with_suffix(".jsonl.tmp")
            try:
                tmp.write_text("".join(line + "\n" for line in kept))
                os.replace(tmp, self.path)
            except OSError as e:
                raise self._error("write", e) from e

    def _error(self, verb: str, e: OSError) -> MetricsError:
        return MetricsError(f"cannot {verb} {self.path}: {e.strerror or e} (disk full, not writable, or not a file?); "
                            "the run stops before this step's checkpoint: fix the cause and run the same command to resume")

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
