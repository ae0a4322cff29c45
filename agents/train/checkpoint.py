"""Checkpoints that resume a run exactly, written atomically.

A checkpoint is a folder `step-NNNNNN/` holding:
- `<name>.safetensors`: the trainable weights of each model (`policy`, and `ranker` for COSEARCH);
- `<name>.optim.pt`: optimizer and scheduler state, loaded with `torch.load(weights_only=True)` (plain
  tensors and numbers, never arbitrary pickled objects);
- `state.json`: step, data position, the RNG states of Python, NumPy and torch, the config;
- `manifest.json`: each file's size and SHA-256, written last.

It is written into a temporary sibling folder, every file and the folder are flushed to disk (`fsync`),
and only then is it renamed into place: a crash or a power loss mid-save leaves either the previous
checkpoint or the new one, never a partial one (without `fsync`, a power loss can leave files of zero
bytes behind complete-looking names). The temporary folder a killed save leaves behind is removed by the
next save. A failed write (disk full, file size limit, permissions) raises `CheckpointError` naming the
folder and leaves the previous checkpoints as they were.

Resuming (`load_newest_valid`) takes the newest checkpoint that passes every check of
`agents.train.checkpoint_checks` (its manifest, `state.json`'s fields and ranges, each weight's name,
shape, dtype and finiteness, the optimizer state against each parameter), all made before anything is
loaded into the live model or optimizer. One that is refused is skipped with a warning naming the file
and why, and the one before it is loaded; if none passes, `CheckpointError` lists every one refused. A
run that resumes from an older checkpoint repeats the steps after it, exactly as it first ran them, and
its next save replaces the refused one.

The final checkpoint of a finished learner of `agents.experiments` keeps its weights only
(`drop_optimizer_states`): they export and evaluate as any checkpoint's; continuing from it is refused.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager as ContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from agents.train.checkpoint_checks import (FORMAT, CheckpointError, check_optimizer, check_weights, read_verified_state,
                                            write_manifest)
from searchgym.retrieval.integrity import sync_folder, sync_tree

__all__ = ["CheckpointError", "drop_optimizer_states", "list_checkpoints", "load_checkpoint", "load_newest_valid", "load_policy_weights",
           "rng_state", "save_checkpoint", "set_rng_state", "trainable_state"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^step-(\d{6,})$")


def rng_state() -> dict[str, Any]:
    np_state = np.random.get_state()
    return {
        "python": _jsonable(random.getstate()),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "torch": torch.get_rng_state().tolist(),
    }


def set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(_tupled(state["python"]))
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that training changes (all of them, or only LoRA adapters), contiguous copies."""
    return {n: p.detach().cpu().contiguous().clone() for n, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(root: Path, step: int, models: Mapping[str, torch.nn.Module], optimizers: Mapping[str, tuple], state: dict[str, Any], *,
                    keep: int = 2, resident: Callable[[Any], ContextManager] | None = None) -> Path:
    """Write checkpoint `step` under `root`; keep the newest `keep` checkpoints. `resident(x)`, when given, is
    entered around the writing of each model and optimizer `x` (`agents.memory.Parking.resident`: one that
    waits in a file is read back for its own write only)."""
    resident = resident or (lambda _: nullcontext())
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-*"):
        # Left by a process killed mid-save (never loaded: not a step-N folder); its space is needed now.
        shutil.rmtree(stale, ignore_errors=True)
    target = root / f"step-{step:06d}"
    try:
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    except OSError as e:
        raise CheckpointError(f"could not write checkpoint {target}: {e}; the previous checkpoints are intact") from e
    try:
        for name, model in models.items():
            with resident(model):
                save_file(trainable_state(model), str(tmp / f"{name}.safetensors"))
        for name, (optimizer, scheduler) in optimizers.items():
            with resident(optimizer):
                torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, tmp / f"{name}.optim.pt")
        (tmp / "state.json").write_text(json.dumps({**state, "step": step, "rng": rng_state(), "checkpoint_format": FORMAT}))
        write_manifest(tmp)
        sync_tree(tmp)  # every byte on disk before the checkpoint exists under its name
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        sync_folder(root)  # the rename itself
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        # safetensors and torch.save report a failed write (disk full, file size limit) as their own errors.
        if isinstance(e, (OSError, RuntimeError, SafetensorError)):
            raise CheckpointError(
                f"could not write checkpoint {target}: {e} (disk full or not writable?); the previous checkpoints are intact"
            ) from e
        raise
    for old in list_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def drop_optimizer_states(path: Path) -> int:
    """Turn checkpoint `path` into the final weights of a finished run: delete its optimizer and scheduler
    states (`*.optim.pt`, two thirds of an AdamW run's checkpoint) and record that in its `state.json`
    (`optimizer_states: false`) and manifest. The weights stay as they were, for `load_policy_weights`
    (`python -m agents export`, evaluation); continuing training from it is refused by `load_checkpoint`.
    The bytes freed (0 for a checkpoint without such files, or a sharded one)."""
    files = sorted(path.glob("*.optim.pt"))
    if not files:
        return 0
    state = json.loads((path / "state.json").read_text())
    tmp = path / "state.json.tmp"
    tmp.write_text(json.dumps({**state, "optimizer_states": False}))
    os.replace(tmp, path / "state.json")
    freed = sum(f.stat().st_size for f in files)
    for f in files:
        f.unlink()
    write_manifest(path)
    sync_tree(path)
    return freed


def list_checkpoints(root: Path) -> list[Path]:
    """The checkpoint folders (`step-NNNNNN`) under `root`, oldest first. Only a complete checkpoint is ever
    renamed to such a name; one damaged since is refused when loaded, with a warning."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def load_newest_valid(root: Path, models: Mapping[str, torch.nn.Module], optimizers: Mapping[str, tuple],
                      check: Callable[[Path, dict[str, Any]], None] | None = None) -> tuple[Path, dict[str, Any]] | None:
    """Load the newest checkpoint under `root` that loads (see the module docstring); (its path, its state),
    or None when there is none. Raises `CheckpointError` listing each checkpoint refused when all are.
    `check` is passed to `load_checkpoint`."""
    return newest_that_loads(root, lambda path: load_checkpoint(path, models, optimizers, check=check))


def newest_that_loads(root: Path, load: Callable[[Path], dict[str, Any]],
                      usable: Callable[[Path], None] | None = None) -> tuple[Path, dict[str, Any]] | None:
    """(path, state) of the newest checkpoint under `root` that `load(path)` loads without a `CheckpointError`,
    each refused one before it named in a warning; None when there is none. Raises `CheckpointError`
    listing each checkpoint refused when all are. Any other error of `load` stops the search, as does any
    error of `usable(path)`, called on each checkpoint before it is loaded (one no fallback can mend)."""
    refused: list[str] = []
    for path in reversed(list_checkpoints(root)):
        if usable is not None:
            usable(path)
        try:
            state = load(path)
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


def load_policy_weights(checkpoint: str | Path, model: torch.nn.Module, model_name: str) -> None:
    """Copy a whole-weights checkpoint's policy (`policy.safetensors`) into `model`, a fresh load of the
    model the run trained (`model_name`, for messages), e.g. to evaluate or export a learner's final policy.
    A `CheckpointError` names what is wrong: no weights file, or weights that do not fit the model (unknown
    or missing names, as a LoRA run's adapters are; other shapes). Nothing else of the checkpoint is read."""
    weights_file = Path(checkpoint) / "policy.safetensors"
    if not weights_file.is_file():
        raise CheckpointError(f"{checkpoint} is not a checkpoint: it has neither policy.dcp/ (sharded) nor policy.safetensors")
    try:
        weights = load_file(str(weights_file))
    except (OSError, SafetensorError) as e:
        raise CheckpointError(f"cannot read {weights_file}: {type(e).__name__}: {e}") from e
    params = dict(model.named_parameters())
    unknown, missing = sorted(set(weights) - set(params)), sorted(set(params) - set(weights))
    if unknown or missing:
        raise CheckpointError(f"{weights_file} does not fit {model_name}: " + "; ".join(
            f"{what} {names[:3]}{'...' if len(names) > 3 else ''}" for what, names in
            (("unknown weights", unknown), ("missing weights", missing)) if names)
            + " (a LoRA run's checkpoint holds only its adapters)")
    with torch.no_grad():
        for n, tensor in weights.items():
            if params[n].shape != tensor.shape:
                raise CheckpointError(f"{weights_file}: {n} has shape {tuple(tensor.shape)}, {model_name} {tuple(params[n].shape)}")
            params[n].copy_(tensor)


def load_checkpoint(path: Path, models: Mapping[str, torch.nn.Module], optimizers: Mapping[str, tuple],
                    check: Callable[[Path, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Restore weights, optimizer and scheduler states and RNG states; return the saved state dict.

    Every check (`agents.train.checkpoint_checks`) runs before anything is loaded; `check(path, state)`
    runs on the saved state among them and may raise `CheckpointError` (e.g. for a config layout this
    version cannot read). A refused checkpoint raises `CheckpointError` and leaves the live model,
    optimizers and RNGs untouched."""
    state = read_verified_state(path)
    if optimizers and state.get("optimizer_states") is False:
        raise CheckpointError(f"{path} holds only the final weights of a finished run (its optimizer states were dropped when it "
                              "ended): it can be exported or evaluated, not continued; train again from those weights instead")
    if check is not None:
        check(path, state)
    if (path / "policy.dcp").is_dir():
        raise CheckpointError(f"{path} holds FSDP2 shards: resume with --distributed --sharding fsdp2, or turn it into a "
                              "model folder with python -m agents export")
    weights = {name: check_weights(path / f"{name}.safetensors", model) for name, model in models.items()}
    saved = {name: check_optimizer(path / f"{name}.optim.pt", optimizer, scheduler)
             for name, (optimizer, scheduler) in optimizers.items()}
    try:
        with torch.no_grad():
            for name, model in models.items():
                params = dict(model.named_parameters())
                for n, tensor in weights[name].items():
                    params[n].copy_(tensor)
        for name, (optimizer, scheduler) in optimizers.items():
            optimizer.load_state_dict(saved[name]["optimizer"])
            scheduler.load_state_dict(saved[name]["scheduler"])
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        # Every check passed, so this is a gap in them; the caller's fallback overwrites whatever was copied.
        raise CheckpointError(f"checkpoint {path} passed its checks but did not load: {type(e).__name__}: {e}") from e
    set_rng_state(state["rng"])
    return state


def _jsonable(value):
    return [_jsonable(v) for v in value] if isinstance(value, (tuple, list)) else value


def _tupled(value):
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value
