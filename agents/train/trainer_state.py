"""The trainer's checkpoints: what `Trainer.save` writes, and how a resumed run finds and checks the newest one.

Functions of the trainer (as `agents.train.sft.cold_start` is), kept apart from the training loop.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from agents.precision import dtype_name
from agents.train import setup
from agents.train.checkpoint import CheckpointError, load_newest_valid, save_checkpoint
from agents.train.sharded_checkpoint import load_newest_sharded, save_sharded

if TYPE_CHECKING:
    from agents.train.trainer import Trainer

logger = logging.getLogger("agents.train.trainer")  # the trainer's own messages


def save(trainer: Trainer) -> Path | None:
    """`Trainer.save`: a checkpoint of the run's models, optimizers and position."""
    state = {"position": trainer.position, "config": setup.jsonable_config(trainer.config), "versions": {"policy": trainer.policy.weight_version},
             "dtype": dtype_name(trainer.compute_dtype)}
    if trainer.sharded is not None:
        return save_sharded(trainer.out / "checkpoints", trainer.step, trainer.sharded, *trainer.optimizers["policy"], trainer.tokenizer, state,
                            whole=whole_models(trainer))
    if trainer.accelerator is not None:
        trainer.accelerator.wait_for_everyone()
    if not trainer.is_main:
        return None
    return save_checkpoint(trainer.out / "checkpoints", trainer.step, trainer.models, trainer.optimizers, state,
                           resident=trainer.parking.resident if trainer.parking is not None else None)


def whole_models(trainer: Trainer) -> dict[str, torch.nn.Module]:
    """Models a sharded checkpoint keeps whole beside the shards: the KL reference taken after a cold start."""
    return {"reference": trainer.models["reference"]} if "reference" in trainer.models else {}


def load_newest(trainer: Trainer) -> tuple[Path, dict] | None:
    """(path, state) of the newest checkpoint of the run that passes its checks, None when there is none."""
    root = trainer.out / "checkpoints"
    if trainer.sharded is not None:
        return load_newest_sharded(root, trainer.sharded, *trainer.optimizers["policy"], check=partial(check_state, trainer),
                                   whole=whole_models(trainer))
    return load_newest_valid(root, trainer.models, trainer.optimizers, check=partial(check_state, trainer))


def check_state(trainer: Trainer, path: Path, state: dict) -> None:
    """`setup.check_run_state`, and a checkpointed KL reference in this run's precision: a bfloat16 run keeps
    its reference's linear weights in bfloat16 (`agents.precision.frozen_copy`), which a float32 run's
    reference cannot load, nor the reverse."""
    setup.check_run_state(path, state)
    saved = state.get("dtype", "float32")
    references = sorted(name for name in trainer.models if name.endswith("reference"))
    if references and saved != dtype_name(trainer.compute_dtype):
        raise CheckpointError(f"{path} was computed in {saved} and holds the cold-started KL reference "
                              f"({', '.join(references)}) in that precision; this run computes in "
                              f"{dtype_name(trainer.compute_dtype)} (dtype={trainer.config.dtype!r}): resume with "
                              f"TrainConfig.dtype={saved!r} (--dtype {saved})")


def restore(trainer: Trainer, path: Path, state: dict) -> None:
    """The run's step and position from a loaded checkpoint; the policies told their weights changed."""
    trainer.step = int(path.name.split("-")[1])
    trainer.position = int(state["position"])
    if state.get("dtype", "float32") != dtype_name(trainer.compute_dtype):
        logger.warning("%s was computed in %s, this run computes in %s (dtype=%r): it continues, but not as the uninterrupted "
                       "run would have; set TrainConfig.dtype to %s for that", path, state.get("dtype", "float32"),
                       dtype_name(trainer.compute_dtype), trainer.config.dtype, state.get("dtype", "float32"))
    trainer.policy.mark_updated()
    if trainer.second_model is not None:
        trainer.second_model.mark_restored()
    logger.info("resumed from %s (step %d)", path, trainer.step)
