"""Training metrics: what a step reports, and the `metrics.jsonl` (+ TensorBoard) log that a resumed run
keeps at one line per step."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np

from agents.learners.batch import LearnerBatch
from agents.rollout import rollout_metrics
from agents.train.distributed import all_reduce_sum
from agents.train.tb import log_tensorboard
from agents.train.update import UpdateStats

logger = logging.getLogger(__name__)


def episode_summaries(trajectories) -> list[dict]:
    """Each trajectory's episode summary (`info["episode"]`), or {} when it has none."""
    return [t.step_infos[-1].get("episode", {}) if t.step_infos else {} for t in trajectories]


def step_rollout_metrics(trajectories, targets: LearnerBatch) -> dict[str, float]:
    """The rollout engine's batch statistics plus what only the env's episode summaries and the learner know."""
    summaries = episode_summaries(trajectories)
    rates = [s.get("entity_rate") for s in summaries if s.get("entity_rate") is not None]
    return {
        **rollout_metrics(trajectories),
        "rollout/reward": float(np.mean(targets.rewards)),
        "rollout/em": float(np.mean([s.get("em", 0.0) for s in summaries])),
        "rollout/f1": float(np.mean([s.get("f1", 0.0) for s in summaries])),
        "rollout/entity_rate": float(np.mean(rates)) if rates else 0.0,
        "rollout/sampled_tokens": float(sum(t.num_sampled_tokens for t in trajectories)),
        "rollout/included": float(sum(targets.include)),
    }


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
        with open(self.path, "a") as f:
            f.write(json.dumps(metrics) + "\n")
        if self.tensorboard:
            self.step = step
            log_tensorboard(self, metrics)

    def drop_after(self, step: int) -> None:
        """Drop lines of steps after checkpoint `step` (logged, then the process died before the checkpoint
        was written) and lines cut short by a crash: the resumed run logs those steps again, and each step
        must have exactly one line."""
        if not self.path.is_file():
            return
        lines = self.path.read_text().splitlines()
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
            tmp.write_text("".join(line + "\n" for line in kept))
            os.replace(tmp, self.path)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
