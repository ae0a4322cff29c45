"""Checks that a checkpoint is whole and fits the run, made before any of it is loaded into the live model
or optimizer.

A checkpoint is refused (`CheckpointError`, naming the file and the reason) when:

1. its manifest (`manifest.json`, written last: each file's size and SHA-256, as an index folder records
   them, `searchgym.retrieval.integrity`) is missing or unreadable, or a file it lists is missing, of
   another size or another hash (truncated, emptied by a power loss, a flipped bit);
2. `state.json` is not an object holding `step` (the folder's) and `rng` (RNG states that Python, NumPy
   and torch accept, each value in its range), or holds a `position` that is not an integer >= 0 or a
   `config` that is not an object (the trainer's own check requires both);
3. a weights file is unreadable, lacks a trainable weight or holds one the model does not have, or holds
   one of another shape or dtype (a weight that would broadcast, a scalar for a matrix, integers) or one
   that is not finite;
4. an optimizer file is unreadable or not plain tensors, its parameter groups differ from the live
   optimizer's in number, size or settings, a parameter's state lacks what this optimizer keeps (or holds
   more), or a state tensor differs from its parameter in shape or dtype (fused AdamW would read past its
   buffers: a segfault, not an exception) or is not finite; or its scheduler state differs in layout
   from the live scheduler's.

A checkpoint written before manifests existed (its `state.json` has no `checkpoint_format`) gets every
check but the first, with a warning.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import random
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import torch

from searchgym.errors import IndexIntegrityError, SearchGymError
from searchgym.retrieval.integrity import folder_records, verify_files

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = 2
"""`state.json`'s `checkpoint_format`: 2 has a manifest (checkpoints without the field were written before)."""
REMEDY = "the checkpoint is damaged: resume from the one before it, or delete it"


class CheckpointError(SearchGymError):
    """A checkpoint cannot be written or read."""


def write_manifest(folder: Path) -> None:
    """Record the size and SHA-256 of every file under `folder` in its `manifest.json` (written last)."""
    records = {name: r for name, r in folder_records(folder).items() if name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps({"format": 1, "files": records}, sort_keys=True))


def read_verified_state(path: Path) -> dict[str, Any]:
    """The checked `state.json` of checkpoint `path`, once every file is as its manifest records (checks 1
    and 2 of the module docstring)."""
    has_manifest = (path / MANIFEST).exists() or (path / MANIFEST).is_symlink()
    if has_manifest:
        verify_manifest(path)
    state = read_state(path)
    if not has_manifest:
        if "checkpoint_format" in state:
            raise CheckpointError(f"{path / MANIFEST} is missing (it is written last: the checkpoint never finished, "
                                  f"or it was deleted); {REMEDY}")
        logger.warning("checkpoint %s was written before checkpoints recorded file hashes: its files are checked "
                       "for shape and content only", path)
    return state


def verify_manifest(path: Path) -> None:
    """Every file `path/manifest.json` lists is there with its size and hash (see the module docstring)."""
    file = path / MANIFEST
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
        files = manifest["files"]
        if not isinstance(files, dict) or not all(isinstance(r, dict) for r in files.values()):
            raise TypeError("'files' must map each name to its size and sha256")
    except (OSError, ValueError, RecursionError, KeyError, TypeError) as e:
        raise CheckpointError(f"{file} is unreadable ({type(e).__name__}: {e}); {REMEDY}") from None
    if "state.json" not in files:
        raise CheckpointError(f"{file} does not list state.json; {REMEDY}")
    try:
        verify_files(path, files, mode="full", remedy=REMEDY, stamp_folder=False)
    except IndexIntegrityError as e:
        raise CheckpointError(str(e)) from None


# -- state.json -----------------------------------------------------------------------------------------


def read_state(path: Path) -> dict[str, Any]:
    """`path/state.json`, checked (see the module docstring)."""
    file = path / "state.json"
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{file} is missing; {REMEDY}") from None
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{file} is unreadable ({type(e).__name__}: {e}); {REMEDY}") from None
    problem = _state_problem(path, state)
    if problem:
        raise CheckpointError(f"{file}: {problem}; {REMEDY}")
    return state


def _state_problem(path: Path, state: Any) -> str | None:
    if not isinstance(state, dict):
        return f"holds a JSON {type(state).__name__}, not an object"
    step = state.get("step")
    if not _is_int(step) or f"step-{step:06d}" != path.name:
        return f"step is {str(step)[:40]!r}, the folder is {path.name}"
    # The caller's own fields (the trainer's `check` requires them): checked here when present.
    if "position" in state and (not _is_int(state["position"]) or state["position"] < 0):
        return f"position must be an integer >= 0, got {str(state['position'])[:80]}"
    if "config" in state and not isinstance(state["config"], dict):
        return f"config must be an object, got {type(state['config']).__name__}"
    rng = state.get("rng")
    if not isinstance(rng, dict):
        return f"rng must be an object of RNG states, got {type(rng).__name__}"
    for name, check in (("python", _python_rng_problem), ("numpy", _numpy_rng_problem), ("torch", _torch_rng_problem)):
        problem = check(rng.get(name))
        if problem:
            return f"rng.{name}: {problem}"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _words(values: Any, n: int, bits: int) -> bool:
    return (isinstance(values, list) and len(values) == n
            and all(_is_int(v) and 0 <= v < 1 << bits for v in values))


def _python_rng_problem(state: Any) -> str | None:
    if not (isinstance(state, list) and len(state) == 3 and state[0] == 3 and isinstance(state[1], list)):
        return "not [3, [624 words and a position], gauss]"
    words = state[1]
    if not (_words(words[:-1], 624, 32) and len(words) == 625 and _is_int(words[-1]) and 0 <= words[-1] <= 624):
        return "the Mersenne Twister state must be 624 32-bit words and a position in 0..624"
    if state[2] is not None and not (isinstance(state[2], float) and math.isfinite(state[2])):
        return f"the cached gauss must be null or a finite number, got {state[2]!r}"
    try:
        random.Random().setstate((3, tuple(words), state[2]))
    except (TypeError, ValueError, OverflowError) as e:
        return f"refused by random.setstate: {e}"
    return None


def _numpy_rng_problem(state: Any) -> str | None:
    if not (isinstance(state, list) and len(state) == 5 and state[0] == "MT19937"):
        return "not ['MT19937', keys, position, has_gauss, cached_gaussian]"
    _, keys, pos, has_gauss, cached = state
    if not _words(keys, 624, 32):
        return "keys must be 624 32-bit words"
    if not (_is_int(pos) and 0 <= pos <= 624 and has_gauss in (0, 1) and isinstance(cached, (int, float))
            and not isinstance(cached, bool) and math.isfinite(cached)):
        return f"position {pos!r} must be in 0..624, has_gauss {has_gauss!r} 0 or 1, cached_gaussian a finite number"
    try:
        np.random.RandomState().set_state(("MT19937", np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    except (TypeError, ValueError, OverflowError) as e:
        return f"refused by numpy: {e}"
    return None


def _torch_rng_problem(state: Any) -> str | None:
    size = torch.get_rng_state().numel()
    if not _words(state, size, 8):
        return f"must be {size} bytes (integers 0..255)"
    try:
        torch.Generator().set_state(torch.tensor(state, dtype=torch.uint8))
    except (TypeError, ValueError, RuntimeError) as e:
        return f"refused by torch: {e}"
    return None


# -- weights --------------------------------------------------------------------------------------------


def check_weights(file: Path, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The weights in `file` (a safetensors file of `trainable_state`), once each is known to be one of the
    model's trainable parameters with its exact shape and dtype and finite values, and none is missing."""
    from safetensors.torch import load_file

    try:
        weights = load_file(str(file))
    except Exception as e:  # noqa: BLE001 - whatever the reader raises for bytes it cannot read
        raise CheckpointError(f"{file} is unreadable ({type(e).__name__}: {e}); {REMEDY}") from None
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    unknown, missing = sorted(set(weights) - set(params)), sorted(set(params) - set(weights))
    if missing or unknown:
        raise CheckpointError(f"{file} does not fit the model: " + "; ".join(
            f"{what} {names[:3]}{'...' if len(names) > 3 else ''}" for what, names in
            (("missing weights", missing), ("unknown weights", unknown)) if names)
            + " (was it saved with other LoRA settings, or by another model?)")
    for name, tensor in weights.items():
        problem = tensor_problem(tensor, params[name])
        if problem:
            raise CheckpointError(f"{file}: weight {name} {problem}; {REMEDY}")
    return weights


def tensor_problem(tensor: Any, like: torch.Tensor) -> str | None:
    """Why `tensor` cannot stand in for `like` (a parameter or its optimizer state), or None."""
    if not isinstance(tensor, torch.Tensor):
        return f"is a {type(tensor).__name__}, not a tensor"
    if tuple(tensor.shape) != tuple(like.shape):
        return f"has shape {tuple(tensor.shape)}, the parameter {tuple(like.shape)}"
    if tensor.dtype != like.dtype:
        return f"has dtype {tensor.dtype}, the parameter {like.dtype}"
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        return "holds NaN or infinite values"
    return None


# -- optimizer and scheduler ----------------------------------------------------------------------------


def check_optimizer(file: Path, optimizer: torch.optim.Optimizer, scheduler) -> dict[str, Any]:
    """`{"optimizer": ..., "scheduler": ...}` read from `file`, once it fits the live `optimizer` and
    `scheduler` (see the module docstring)."""
    try:
        saved = torch.load(file, weights_only=True)
    except Exception as e:  # noqa: BLE001 - a damaged zip, a planted pickle (UnpicklingError), an empty file
        raise CheckpointError(f"{file} is unreadable ({type(e).__name__}: {e}); {REMEDY}") from None
    problem = _optimizer_file_problem(saved, optimizer, scheduler)
    if problem:
        raise CheckpointError(f"{file}: {problem}; {REMEDY}")
    return saved


def _optimizer_file_problem(saved: Any, optimizer: torch.optim.Optimizer, scheduler) -> str | None:
    if not isinstance(saved, dict) or set(saved) != {"optimizer", "scheduler"}:
        return "must hold exactly 'optimizer' and 'scheduler'"
    state = saved["optimizer"]
    if not isinstance(state, dict) or not isinstance(state.get("state"), dict) or not isinstance(state.get("param_groups"), list):
        return "the optimizer state must hold 'state' and 'param_groups'"
    live = optimizer.state_dict()
    if len(state["param_groups"]) != len(live["param_groups"]):
        return f"{len(state['param_groups'])} parameter groups, the optimizer has {len(live['param_groups'])}"
    for i, (group, live_group) in enumerate(zip(state["param_groups"], live["param_groups"])):
        problem = _group_problem(group, live_group)
        if problem:
            return f"parameter group {i}: {problem}"
    problem = _param_state_problem(state["state"], optimizer)
    if problem:
        return problem
    problem = layout_problem(saved["scheduler"], scheduler.state_dict(), "scheduler")
    return problem


def _group_problem(group: Any, live: dict[str, Any]) -> str | None:
    if not isinstance(group, dict):
        return f"a {type(group).__name__}, not an object"
    if group.get("params") != live["params"]:
        return f"parameters {str(group.get('params'))[:80]}, the optimizer's are {str(live['params'])[:80]}"
    unknown = sorted(set(group) - set(live))
    if unknown or "lr" not in group:
        return f"settings {unknown} this optimizer does not have" if unknown else "no learning rate"
    for key, value in group.items():
        if key == "params":
            continue
        problem = layout_problem(value, live[key], key)
        if problem:
            return problem
    return None


def layout_problem(saved: Any, live: Any, where: str) -> str | None:
    """Why `saved` cannot replace `live` (a setting, a list or an object of them): another type, length
    or key, or a number that is not finite; None when it can. Keys `live` has and `saved` lacks are
    allowed (torch fills in settings added by a later version)."""
    if isinstance(live, bool) or live is None:
        ok = isinstance(saved, bool) if isinstance(live, bool) else isinstance(saved, (bool, int, float, str, type(None)))
        return None if ok else f"{where} is {saved!r}, expected {type(live).__name__}"
    if isinstance(live, (Integral, Real)):
        integral = isinstance(live, Integral)
        if isinstance(saved, bool) or not isinstance(saved, Integral if integral else Real):
            return f"{where} is {str(saved)[:80]}, expected {'an integer' if integral else 'a number'}"
        return None if integral or math.isfinite(saved) else f"{where} is {saved!r}, not a finite number"
    if isinstance(live, str):
        return None if isinstance(saved, str) else f"{where} is {saved!r}, expected a string"
    if isinstance(live, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(live):
            return f"{where} is {str(saved)[:80]}, expected {len(live)} values"
        return next((p for i, (s, v) in enumerate(zip(saved, live)) if (p := layout_problem(s, v, f"{where}[{i}]"))), None)
    if isinstance(live, dict):
        if not isinstance(saved, dict) or set(saved) - set(live):
            return f"{where} has keys {sorted(map(str, saved))[:8] if isinstance(saved, dict) else type(saved).__name__}, expected {sorted(map(str, live))[:8]}"
        return next((p for k, v in saved.items() if (p := layout_problem(v, live[k], f"{where}.{k}"))), None)
    if isinstance(live, torch.Tensor):
        return None if isinstance(saved, torch.Tensor) and saved.shape == live.shape else f"{where} is not a tensor of shape {tuple(live.shape)}"
    return None


def _param_state_problem(state: dict, optimizer: torch.optim.Optimizer) -> str | None:
    params = [p for group in optimizer.param_groups for p in group["params"]]
    expected = _state_layout(optimizer)
    counts = {k for k, scalar in expected.items() if scalar} if expected is not None else {"step"}
    if expected is None and state:
        # Without the reference layout, every parameter's state must at least hold the same keys.
        expected = dict.fromkeys(next(iter(state.values())) if isinstance(next(iter(state.values())), dict) else ())
    for index, entry in state.items():
        if not _is_int(index) or not 0 <= index < len(params):
            return f"state for parameter {index!r}, the optimizer has {len(params)}"
        if not isinstance(entry, dict):
            return f"state of parameter {index} is a {type(entry).__name__}"
        if expected is not None and set(entry) != set(expected):
            return f"state of parameter {index} holds {sorted(map(str, entry))}, this optimizer keeps {sorted(expected)}"
        for key, value in entry.items():
            problem = _count_problem(value) if key in counts else tensor_problem(value, params[index])
            if problem:
                return f"optimizer state {key!r} of parameter {index} {problem}"
    return None


def _count_problem(value: Any) -> str | None:
    """A per-parameter count such as AdamW's `step`: a finite floating-point scalar tensor (or number) >= 0."""
    if isinstance(value, torch.Tensor):
        ok = value.dim() == 0 and value.is_floating_point() and bool(torch.isfinite(value)) and float(value) >= 0
    else:
        ok = isinstance(value, Real) and not isinstance(value, bool) and (isinstance(value, Integral) or math.isfinite(value)) and value >= 0
    return None if ok else f"is {str(value)[:80]}, expected a finite floating-point count >= 0"


def _state_layout(optimizer: torch.optim.Optimizer) -> dict[str, bool] | None:
    """What this optimizer keeps per parameter (key -> whether it is a scalar count rather than a tensor like
    the parameter), from one step of the same optimizer class and settings on a one-element parameter;
    None when that cannot be done here (the other checks still run)."""
    probe = torch.zeros(1, requires_grad=True)
    accepted = inspect.signature(type(optimizer)).parameters
    try:
        twin = type(optimizer)([probe], **{k: v for k, v in optimizer.defaults.items() if k in accepted})
        probe.grad = torch.zeros(1)
        twin.step()
    except Exception as e:  # noqa: BLE001 - e.g. settings that need a GPU; this check is skipped
        logger.debug("cannot work out the per-parameter state of %s: %s", type(optimizer).__name__, e)
        return None
    return {k: not (isinstance(v, torch.Tensor) and v.dim() > 0) for k, v in twin.state[probe].items()}
