"""TensorBoard, an optional second copy of the metrics: it runs after `metrics.jsonl` is written and may
fail without costing the run anything.

The package is checked when the config is built (`TrainConfig.tensorboard`), so a missing one stops the
run before any step. A failure later (a full disk, a package that breaks on import) is logged once and
TensorBoard is switched off for the rest of the run: `metrics.jsonl` already holds the step, and the
step's checkpoint must not be lost to a second copy of its metrics.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def log_tensorboard(trainer: Any, metrics: dict[str, float]) -> None:
    """Write `metrics` as scalars to `trainer._tb` (created under `trainer.out / "tb"` on first use)."""
    if getattr(trainer, "_tb_failed", False):
        return
    try:
        if trainer._tb is None:
            from torch.utils.tensorboard import SummaryWriter

            trainer._tb = SummaryWriter(str(trainer.out / "tb"))
        step = int(metrics.get("step", trainer.step))
        for key, value in metrics.items():
            if key != "step":
                trainer._tb.add_scalar(key, value, step)
    except Exception as e:  # noqa: BLE001 - an optional logger never ends a training run
        logger.error("TensorBoard logging failed (%s: %s, writing to %s); it is off for the rest of the run, "
                     "metrics.jsonl has every metric", type(e).__name__, e, trainer.out / "tb")
        trainer._tb_failed = True
