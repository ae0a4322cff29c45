"""Sharded checkpoints of an FSDP2 run (`torch.distributed.checkpoint`), in the layout of `checkpoint`.

A checkpoint is a folder `step-NNNNNN/` holding:
- `policy.dcp/`: the model's and the optimizer's state, each rank writing its own shards (DCP's format:
  one `.distcp` file per rank and a `.metadata` index), so no rank ever holds the whole model;
- `policy.scheduler.pt`: the learning-rate scheduler's state;
- `model/`: the model's config and tokenizer, so that `python -m agents export` can rebuild a plain
  `save_pretrained` folder from the checkpoint alone;
- `state.json`: step, data position, RNG states and the run's config, as in a whole-weights checkpoint;
- `{name}.safetensors` for each whole model the run keeps beside the shards (the KL reference taken after a
  cold start: a replica on every rank), written by rank 0;
- `manifest.json`: each file's size and SHA-256 (the shards of every rank included), written last.

Every rank writes into one temporary sibling folder (its name broadcast by rank 0), and rank 0 writes
`state.json` and the manifest last, flushes every file and the folder to disk (`fsync`) and renames the
folder into place after every rank has finished: a run killed mid-save, or a power loss, leaves the
previous checkpoint, never a partial one. `out_dir` must be a file system every rank sees.

Resuming takes the newest checkpoint that passes its checks, all made before anything is loaded into the
sharded model or the optimizer: rank 0 checks the manifest (every shard's hash), `state.json` and the
scheduler state as `agents.train.checkpoint_checks` does for whole weights, and every tensor's shape and
dtype recorded in the shards' metadata against the live model's and optimizer's; then every rank reads
its parts of the shards into a staging copy (whatever the number of ranks that wrote them: the states
are briefly held twice), and the ranks agree that every value is finite. Only then do the copies replace
the live states and the scheduler and RNG states are restored, so the run continues exactly as the
uninterrupted one. A refused checkpoint is skipped with a warning naming the file and why, and the one
before it is tried; if none passes, `CheckpointError` lists every one refused.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from agents.train.checkpoint import CheckpointError, list_checkpoints, rng_state, set_rng_state, trainable_state
from agents.train.checkpoint_checks import FORMAT, REMEDY, check_weights, layout_problem, read_verified_state, write_manifest
from searchgym.retrieval.integrity import sync_folder, sync_tree

logger = logging.getLogger(__name__)

MODEL_STATE = "policy.dcp"
"""The DCP folder of a sharded checkpoint; its presence tells a sharded checkpoint from a whole-weights one."""
SCHEDULER = "policy.scheduler.pt"


def is_sharded(path: Path) -> bool:
    return (path / MODEL_STATE).is_dir()


def _states(sharded, optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(sharded.root, optimizer)
    return {"model": model_state, "optim": optim_state}


def save_sharded(root: Path, step: int, sharded, optimizer, scheduler, tokenizer, state: dict[str, Any], *, keep: int = 2,
                 whole: Mapping[str, torch.nn.Module] | None = None) -> Path | None:
    """Write checkpoint `step` under `root` (every rank calls it); keep the newest `keep`. `whole`: models held
    whole on every rank, written by rank 0 as `{name}.safetensors`. Returns the folder on rank 0, None
    elsewhere."""
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
            torch.save({"scheduler": scheduler.state_dict()}, tmp / SCHEDULER)
            for model_name, model in (whole or {}).items():
                from safetensors.torch import save_file

                save_file(trainable_state(model), str(tmp / f"{model_name}.safetensors"))
            sharded.lm.config.save_pretrained(tmp / "model")
            tokenizer.save_pretrained(tmp / "model")
            (tmp / "state.json").write_text(json.dumps({**state, "step": step, "rng": rng_state(), "checkpoint_format": FORMAT}))
            write_manifest(tmp)
            sync_tree(tmp)  # every rank's shards and rank 0's files on disk before the checkpoint has its name
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
            sync_folder(root)
        except (OSError, RuntimeError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointError(f"could not write checkpoint {target}: {e}; the previous checkpoints are intact") from e
        for old in list_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return target if main else None


def load_newest_sharded(root: Path, sharded, optimizer, scheduler,
                        check: Callable[[Path, dict[str, Any]], None] | None = None,
                        whole: Mapping[str, torch.nn.Module] | None = None) -> tuple[Path, dict[str, Any]] | None:
    """Load the newest checkpoint under `root` that passes its checks (see the module docstring) into the
    sharded model, the optimizer and the scheduler (every rank calls it); (its path, its state), or None
    when there is none. `check(path, state)` may refuse a checkpoint (`CheckpointError`) before anything is
    loaded. `whole`: the models `save_sharded` wrote whole, restored on every rank. Raises `CheckpointError`
    listing each checkpoint refused when all are."""
    refused: list[str] = []
    for path in reversed(list_checkpoints(root)):
        if not is_sharded(path) and (path / "policy.safetensors").exists():
            raise CheckpointError(f"{path} holds whole weights (a run without sharding): resume it without --sharding fsdp2, "
                                  "or start a new out_dir")
        try:
            state = _load_sharded(path, sharded, optimizer, scheduler, check, whole or {})
        except CheckpointError as e:
            logger.warning("refused checkpoint %s: %s; trying the one before it", path, e)
            refused.append(f"{path.name}: {e}")
            continue
        if refused:
            logger.warning("resuming from %s instead of the newer checkpoint(s) refused: %s", path, "; ".join(refused))
        return path, state
    if refused:
        raise CheckpointError(f"no checkpoint under {root} loads; delete the refused ones to start over, or restore "
                              "them from a backup:\n  " + "\n  ".join(refused))
    return None


def _load_sharded(path: Path, sharded, optimizer, scheduler, check, whole: Mapping[str, torch.nn.Module]) -> dict[str, Any]:
    """Checks, a staged load, then the live states replaced (see the module docstring). Every rank calls it
    and every rank reaches the same verdict."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    states = _states(sharded, optimizer)
    verdict: list[Any] = [None]
    if dist.get_rank() == 0:
        verdict[0] = _checked_on_rank0(path, states, scheduler, check, whole)
    dist.broadcast_object_list(verdict, src=0)
    if isinstance(verdict[0], str):
        raise CheckpointError(verdict[0])
    state = verdict[0]
    staged = _empty_like(states)
    try:
        dcp.load(staged, checkpoint_id=str(path / MODEL_STATE))
    except Exception as e:  # noqa: BLE001 - DCP raises its own CheckpointException, on every rank alike
        raise CheckpointError(f"the shards of {path / MODEL_STATE} did not load ({type(e).__name__}: {str(e)[:300]}); "
                              f"{REMEDY}") from e
    problems = [None] * dist.get_world_size()
    dist.all_gather_object(problems, _first_non_finite(staged))
    problem = next((p for p in problems if p), None)
    if problem:
        raise CheckpointError(f"{path / MODEL_STATE}: {problem}; {REMEDY}")
    set_state_dict(sharded.root, optimizer, model_state_dict=staged["model"], optim_state_dict=staged["optim"])
    for name, model in whole.items():
        # Checked on rank 0 against the manifest's hash and the model; every rank reads the same bytes.
        from safetensors.torch import load_file

        params = dict(model.named_parameters())
        with torch.no_grad():
            for n, tensor in load_file(str(path / f"{name}.safetensors")).items():
                params[n].copy_(tensor)
    scheduler.load_state_dict(torch.load(path / SCHEDULER, weights_only=True)["scheduler"])
    set_rng_state(state["rng"])
    return state


def _checked_on_rank0(path: Path, states: dict[str, Any], scheduler, check,
                      whole: Mapping[str, torch.nn.Module]) -> dict[str, Any] | str:
    """The checked state (the manifest, state.json, the scheduler state, the shards' shapes and dtypes, the
    whole models' weights), or why the checkpoint is refused."""
    try:
        state = read_verified_state(path)
        if check is not None:
            check(path, state)
        for name, model in whole.items():
            check_weights(path / f"{name}.safetensors", model)
        try:
            saved = torch.load(path / SCHEDULER, weights_only=True)
        except Exception as e:  # noqa: BLE001 - whatever torch raises for bytes it cannot read
            raise CheckpointError(f"{path / SCHEDULER} is unreadable ({type(e).__name__}: {e}); {REMEDY}") from None
        problem = ("must hold 'scheduler'" if not isinstance(saved, dict) or set(saved) != {"scheduler"}
                   else layout_problem(saved["scheduler"], scheduler.state_dict(), "scheduler"))
        if problem:
            problem = f"{path / SCHEDULER}: {problem}"
        else:
            problem = _metadata_problem(path / MODEL_STATE, states)
        if problem:
            raise CheckpointError(f"{problem}; {REMEDY}")
    except CheckpointError as e:
        return str(e)
    return state


def _metadata_problem(folder: Path, states: dict[str, Any]) -> str | None:
    """Whether every tensor of the live states is in the shards' metadata with its global shape and dtype."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint._nested_dict import flatten_state_dict
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    try:
        metadata = FileSystemReader(str(folder)).read_metadata().state_dict_metadata
    except Exception as e:  # noqa: BLE001 - whatever DCP raises for a metadata file it cannot read
        return f"{folder / '.metadata'} is unreadable ({type(e).__name__}: {e})"
    flat, _ = flatten_state_dict(states)
    for key, live in flat.items():
        if not isinstance(live, torch.Tensor):
            continue
        saved = metadata.get(key)
        if not isinstance(saved, TensorStorageMetadata):
            return f"{folder}: the shards hold no tensor {key}"
        if tuple(saved.size) != tuple(live.shape) or saved.properties.dtype != live.dtype:
            return (f"{folder}: {key} has shape {tuple(saved.size)} and dtype {saved.properties.dtype}, the run's "
                    f"{tuple(live.shape)} and {live.dtype}")
    return None


def _empty_like(value: Any) -> Any:
    """A copy of a nested state with every tensor replaced by an uninitialised one of its kind (a DTensor
    keeps its sharding), for DCP to read into."""
    if isinstance(value, torch.Tensor):
        return torch.empty_like(value)
    if isinstance(value, dict):
        return {k: _empty_like(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_empty_like(v) for v in value]
    return value


def _first_non_finite(value: Any, where: str = "") -> str | None:
    """The first tensor of this rank's part of a nested state that holds NaN or infinite values, named."""
    if isinstance(value, torch.Tensor):
        local = value.to_local() if hasattr(value, "to_local") else value
        if local.is_floating_point() and not bool(torch.isfinite(local).all()):
            return f"{where.lstrip('.')} holds NaN or infinite values"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return next((p for k, v in items if (p := _first_non_finite(v, f"{where}.{k}"))), None)
