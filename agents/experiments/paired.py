"""Paired differences of two policies scored on the same questions, over one or more seeds.

Every seed scores both policies on the same questions, so a question's difference is the unit: per seed,
the mean difference over questions; over seeds, two standard errors of the mean difference:
- over questions: each question's difference averaged over the seeds first (the seeds' evaluations share
  the questions, so their differences are not independent across seeds: evaluation noise), then its
  standard deviation over questions / sqrt(questions);
- over seeds: the standard deviation of the per-seed mean differences / sqrt(seeds) (training noise; needs
  two seeds or more).
A difference is beyond noise when it exceeds twice the larger of the two (about 95% one-sided under a
normal approximation). Beside them, per seed, how many questions went up and how many down: a mean
difference of +0.03 may be 8 questions gained and 2 lost, or 20 gained and 14 lost.

>>> d = paired_difference([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
>>> d.per_seed, d.mean, d.verdict
([0.25, 0.5], 0.375, 'no')
>>> round(d.se_questions, 3), round(d.se_seeds, 3), d.up, d.down
(0.239, 0.125, [1, 2], [0, 0])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairedDifference:
    per_seed: list[float]
    """Each seed's mean difference over the questions."""
    mean: float
    """The mean difference over seeds and questions."""
    se_questions: float
    """Standard error over questions (NaN with one question)."""
    se_seeds: float
    """Standard error over seeds (NaN with one seed)."""
    up: list[int]
    """Per seed, the questions whose difference is above 0."""
    down: list[int]
    """Per seed, the questions whose difference is below 0."""

    @property
    def bound(self) -> float:
        """Twice the larger standard error: what a difference must exceed to be beyond noise."""
        known = [x for x in (self.se_questions, self.se_seeds) if not math.isnan(x)]
        return 2 * max(known) if known else math.inf

    @property
    def verdict(self) -> str:
        """`yes` (beyond noise, above), `worse` (beyond noise, below) or `no`."""
        return "yes" if self.mean > self.bound else ("worse" if self.mean < -self.bound else "no")

    def cells(self) -> list[str]:
        """Table cells: per-seed differences, mean, SE over questions, SE over seeds, beyond noise?, and the
        questions up / down per seed."""
        return [", ".join(f"{x:+.3f}" for x in self.per_seed), f"{self.mean:+.3f}", f"{self.se_questions:.3f}",
                "-" if math.isnan(self.se_seeds) else f"{self.se_seeds:.3f}", self.verdict,
                ", ".join(f"{u}/{d}" for u, d in zip(self.up, self.down))]


HEADER = "mean | SE over questions | SE over seeds | beyond noise? | questions up/down per seed |"
RULE = "|---" * 7 + "|"
"""The separator line of a table whose first two columns are followed by `HEADER`'s."""
"""The columns after a table's first two (what is compared, and its per-seed differences)."""


def paired_difference(diffs: Sequence[Sequence[float]]) -> PairedDifference:
    """The paired statistics of per-seed, per-question differences (one row per seed, the same questions in
    the same order in every row)."""
    rows = np.asarray(diffs, dtype=float)
    if rows.ndim != 2 or rows.shape[1] == 0:
        raise ValueError(f"need one row of per-question differences per seed, got shape {rows.shape}")
    per = rows.mean(axis=1)
    by_question = rows.mean(axis=0)
    se_q = float(by_question.std(ddof=1) / np.sqrt(len(by_question))) if len(by_question) > 1 else math.nan
    se_s = float(per.std(ddof=1) / np.sqrt(len(per))) if len(per) > 1 else math.nan
    return PairedDifference([float(x) for x in per], float(by_question.mean()), se_q, se_s,
                            [int(x) for x in (rows > 0).sum(axis=1)], [int(x) for x in (rows < 0).sum(axis=1)])
