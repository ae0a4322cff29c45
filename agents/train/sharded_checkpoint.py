"""Sharded checkpoints of an FSDP2 run (`torch.distributed.checkpoint`), in the layout of `checkpoint`.

A checkpoint is a folder `step-NNNNNN/` holding:
- `policy.dcp/`: the model's and the optimizer's state, each rank writing its own shards (DCP's format:
  one `.distcp` file per rank and a `.metadata` index), so no rank ever holds the whole model;
- `policy.scheduler.pt`: the learning-rate scheduler's state;
- `model/`: the model's config and tokenizer, so that `python -m agents export` can rebuild a plain
  `save_pretrained` folder from the checkpoint alone;
- `state.json`: step, data position, RNG states and the run's config, as in a whole-weights checkpoint.

Every rank writes into one temporary sibling folder (its name broadcast by rank 0), and rank 0 writes
`state.json` last and renames the folder into place after every rank has finished: a run killed mid-save
leaves the previous checkpoint, never a partial one. `out_dir` must be a file system every rank sees.

Resuming loads the newest complete checkpoint into the sharded model and the optimizer (each rank reads
the parts of the shards it owns, whatever the number of ranks that wrote them) and restores the
scheduler and the RNG states, so the run continues exactly as the uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from agents.train.checkpoint import CheckpointError, list_checkpoints, rng_state, set_rng_state

logger = logging.getLogger(__name__)

MODEL_STATE = "policy.dcp"
"""The DCP folder of a sharded checkpoint; its presence tells a sharded checkpoint from a whole-weights one."""


def is_sharded(path: Path) -> bool:
    return (path / MODEL_STATE).is_dir()


def _states(sharded, optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(sharded.root, optimizer)
    return {"model": model_state, "optim": optim_state}


def save_sharded(root: Path, step: int, sharded, optimizer, scheduler, tokenizer, state: dict[str, Any], *, keep: int = 2) -> Path | None:
    """Write checkpoint `step` under `root` (every rank calls it); keep the newest `keep`. Returns the
    folder on rank 0, None elsewhere."""
    import torch.distributed.checkpoint as dcp

    main = dist.get_rank() == 0
    target = root / f"step-{step:06d}"
    name: list[str | None] = [None]
    if main:
        try:
            root.mkdir(parents=True, exist_ok=True)
            for stale in root.glob(".tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)  # left by a process killed mid-save
            name[0] = tempfile.mkdtemp(prefix=".tmp-", dir=root)
        except OSError as e:
            name[0] = f"error: {e}"
    dist.broadcast_object_list(name, src=0)
    if name[0].startswith("error: "):
        raise CheckpointError(f"could not write checkpoint {target}: {name[0][7:]}; the previous checkpoints are intact")
    tmp = Path(name[0])
    try:
        dcp.save(_states(sharded, optimizer), checkpoint_id=str(tmp / MODEL_STATE))
    except Exception as e:
        raise CheckpointError(f"could not write the shards of checkpoint {target}: {e} (disk full or not writable?); "
                              "the previous checkpoints are intact") from e
    dist.barrier()  # every rank's shards are on disk before rank 0 marks the checkpoint complete
    if main:
        try:
            torch.save({"scheduler": scheduler.state_dict()}, tmp / "policy.scheduler.pt")
            sharded.lm.config.save_pretrained(tmp / "model")
            tokenizer.save_pretrained(tmp / "model")
            # state.json last: its presence marks a complete checkpoint even before the rename.
            (tmp / "state.json").write_text(json.dumps({**state, "step": step, "rng": rng_state()}))
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        except (OSError, RuntimeError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointError(f"could not write checkpoint {target}: {e}; the previous checkpoints are intact") from e
        for old in list_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return target if main else None


def load_newest_sharded(root: Path, sharded, optimizer, scheduler,
                        check: Callable[[Path, dict[str, Any]], None] | None = None) -> tuple[Path, dict[str, Any]] | None:
    """Load the newest complete checkpoint under `root` into the sharded model, the optimizer and the
    scheduler (every rank calls it); (its path, its state), or None when there is none. `check(path,
    state)` may refuse it (`CheckpointError`) before anything is loaded."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    found = list_checkpoints(root)
    if not found:
        return None
    path = found[-1]
    if not is_sharded(path):
        raise CheckpointError(f"{path} holds whole weights (a run without sharding): resume it without --sharding fsdp2, "
                              "or start a new out_dir")
    try:
        state = json.loads((path / "state.json").read_text())
        if check is not None:
            check(path, state)
        states = _states(sharded, optimizer)
        dcp.load(states, checkpoint_id=str(path / MODEL_STATE))
        set_state_dict(sharded.root, optimizer, model_state_dict=states["model"], optim_state_dict=states["optim"])
        scheduler.load_state_dict(torch.load(path / "policy.scheduler.pt", weights_only=True)["scheduler"])
        rng = state["rng"]
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f"sharded checkpoint {path} is unreadable: {type(e).__name__}: {e}; delete it to resume "
                              "from the one before it") from e
    set_rng_state(rng)
    return path, state
