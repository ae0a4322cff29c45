"""Damaged training checkpoints: every kind of damage must end in a fallback to an intact checkpoint (with a
warning naming the damaged file) that then resumes exactly as the uninterrupted run, or, when no intact one
is left, in a `CheckpointError`; never a silent load, an untyped exception or a crashed process.

A small model (two linear layers) is trained five steps with the trainer's own optimizer (fused AdamW and
its warm-up scheduler), drawing its data from the Python, NumPy and torch RNGs, with checkpoints after
steps 1, 2 and 3. Each kind of damage is applied to a copy of those checkpoints (to the newest, or to
every one); then, in a child process (a wrong-shaped optimizer state can take the process down inside
fused AdamW: a death is counted, not suffered), a freshly initialised model resumes with
`load_newest_valid` and trains on to step 5. The damage is either raw (bytes cut, flipped, emptied: the
manifest no longer matches) or written consistently (valid files holding wrong values, the manifest
re-recorded to match, as a buggy writer would leave them), so that every check is reached.

Outcomes: `fell back` (to an older checkpoint, resumed to the same weights and optimizer state as the
uninterrupted run, bit for bit), `stopped` (a `CheckpointError` when every checkpoint is damaged), or a
failure: `loaded silently`, `fell back, ...` with what went wrong (the warning does not name the file, the
resumed run differs), `refused every checkpoint` (an intact one was there), `untyped <Exception>` (a raw
traceback), `died (<signal>)`.

    python -m tools.fuzz_checkpoint [--kind NAME ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import multiprocessing as mp
import os
import pickle
import random
import shutil
import signal
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STEPS, SAVED = 5, (1, 2, 3)
W, O, S, M = "policy.safetensors", "policy.optim.pt", "state.json", "manifest.json"


@dataclass(frozen=True)
class Kind:
    target: str
    """The file the warning or the error must name."""
    damage: Callable[[Path], None]
    """Damages one checkpoint folder."""
    every: bool = False
    """Damage every checkpoint (a typed error is then the right outcome), not only the newest."""


# -- the run being damaged ----------------------------------------------------------------------------------


def _model_and_optimizer(seed: int):
    import torch

    from agents.train.setup import make_optimizer

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    return model, make_optimizer(model, 0.05, 2, "fused")


def _train_step(model, optimizer, scheduler) -> None:
    import numpy as np
    import torch

    # Data from all three RNGs: a resume that restored any of them wrongly draws other data.
    x = torch.randn(16, 4) * float(np.random.rand() + 0.5) + random.random()
    model(x).pow(2).mean().backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def _state_of(model, optimizer) -> dict[str, Any]:
    return {"weights": {n: p.detach().clone() for n, p in model.named_parameters()}, "optim": optimizer.state_dict()}


def _run_state(step: int) -> dict[str, Any]:
    from agents.train.setup import CONFIG_VERSION

    return {"position": 2 * step, "config": {"version": CONFIG_VERSION}}


def build(folder: Path) -> None:
    """Checkpoints of steps 1-3 under `folder/checkpoints`, and the uninterrupted run's final state in
    `folder/reference.pt`."""
    import torch

    from agents.train.checkpoint import save_checkpoint
    from agents.train.setup import seed_everything

    torch.set_num_threads(1)
    seed_everything(0)
    model, (optimizer, scheduler) = _model_and_optimizer(0)
    for step in range(1, STEPS + 1):
        _train_step(model, optimizer, scheduler)
        if step in SAVED:
            save_checkpoint(folder / "checkpoints", step, {"policy": model}, {"policy": (optimizer, scheduler)},
                            _run_state(step), keep=len(SAVED))
    torch.save(_state_of(model, optimizer), folder / "reference.pt")


# -- damage ---------------------------------------------------------------------------------------------------


def _rewrite(path: Path, fn: Callable[[bytearray], bytes | bytearray]) -> None:
    path.write_bytes(bytes(fn(bytearray(path.read_bytes()))))


def _flip_bit(at: Callable[[int], int]) -> Callable[[bytearray], bytearray]:
    def go(b: bytearray) -> bytearray:
        b[at(len(b))] ^= 0x01
        return b
    return go


def _rerecord(folder: Path, name: str) -> None:
    """Record the damaged file's size and hash in the manifest, as a writer that wrote the wrong values would
    have (a checkpoint written before manifests existed has none to update)."""
    manifest = folder / M
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        data = (folder / name).read_bytes()
        m["files"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        manifest.write_text(json.dumps(m))


def _weights(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def go(folder: Path) -> None:
        from safetensors.torch import load_file, save_file

        tensors = load_file(str(folder / W))
        change(tensors)
        save_file(tensors, str(folder / W))
        _rerecord(folder, W)
    return go


def _optim(change: Callable[[dict], Any], *, replace: bool = False) -> Callable[[Path], None]:
    """Change the optimizer file's contents in place (or, with `replace`, write what `change` returns)."""
    def go(folder: Path) -> None:
        import torch

        saved = torch.load(folder / O, weights_only=True)
        result = change(saved)
        torch.save(result if replace else saved, folder / O)
        _rerecord(folder, O)
    return go


def _state(change: Callable[[dict], Any], *, replace: bool = False) -> Callable[[Path], None]:
    """Change `state.json` in place (or, with `replace`, write what `change` returns)."""
    def go(folder: Path) -> None:
        state = json.loads((folder / S).read_text())
        result = change(state)
        (folder / S).write_text(json.dumps(result if replace else state))
        _rerecord(folder, S)
    return go


def _moments(key: str, fn: Callable) -> Callable[[dict], None]:
    def change(saved: dict) -> None:
        saved["optimizer"]["state"][0][key] = fn(saved["optimizer"]["state"][0][key])
    return change


class _Planted:
    def __reduce__(self):
        return (os.getpid, ())  # harmless, but not a tensor: weights_only must refuse it


def _raw_kinds(name: str, file: str) -> dict[str, Kind]:
    return {
        f"{name}: deleted": Kind(file, lambda f: (f / file).unlink()),
        f"{name}: emptied (0 bytes, as a power loss leaves it)": Kind(file, lambda f: (f / file).write_bytes(b"")),
        f"{name}: truncated by half": Kind(file, lambda f: _rewrite(f / file, lambda b: b[: len(b) // 2])),
        f"{name}: one bit flipped near the end": Kind(file, lambda f: _rewrite(f / file, _flip_bit(lambda n: n - 3))),
        f"{name}: random bytes, same size": Kind(file, lambda f: _rewrite(f / file, lambda b: os.urandom(len(b)))),
    }


def _kinds() -> dict[str, Kind]:
    import torch

    k = _raw_kinds("weights", W)
    k["weights: one bit flipped in the header"] = Kind(W, lambda f: _rewrite(f / W, _flip_bit(lambda n: 12)))
    k["weights: replaced by a folder"] = Kind(W, lambda f: ((f / W).unlink(), (f / W).mkdir()))
    consistent = {
        "a bias that broadcasts (1 value for 8)": lambda t: t.__setitem__("0.bias", t["0.bias"][:1].clone()),
        "a scalar in place of a matrix": lambda t: t.__setitem__("0.weight", torch.tensor(0.5)),
        "a matrix transposed": lambda t: t.__setitem__("0.weight", t["0.weight"].t().contiguous()),
        "integer dtype": lambda t: t.__setitem__("2.weight", t["2.weight"].round().to(torch.int32)),
        "float64 dtype": lambda t: t.__setitem__("2.weight", t["2.weight"].double()),
        "a NaN in a weight": lambda t: t["2.weight"].view(-1).__setitem__(0, float("nan")),
        "an infinity in a weight": lambda t: t["2.bias"].__setitem__(1, float("inf")),
        "a weight missing": lambda t: t.pop("2.bias"),
        "an unknown weight added": lambda t: t.__setitem__("3.weight", torch.zeros(2)),
    }
    for what, change in consistent.items():
        k[f"weights: {what}, manifest re-recorded"] = Kind(W, _weights(change))
    k.update(_raw_kinds("optimizer", O))
    consistent = {
        "exp_avg of another shape": _moments("exp_avg", lambda t: t[:2].clone()),
        "exp_avg_sq a scalar": _moments("exp_avg_sq", lambda t: torch.tensor(0.1)),
        "exp_avg in float64": _moments("exp_avg", lambda t: t.double()),
        "a NaN in exp_avg_sq": _moments("exp_avg_sq", lambda t: t.fill_(float("nan"))),
        "step a negative count": _moments("step", lambda t: torch.tensor(-1.0)),
        "step an integer tensor": _moments("step", lambda t: t.to(torch.int64)),
        "a parameter's state without exp_avg_sq": lambda s: s["optimizer"]["state"][1].pop("exp_avg_sq"),
        "state for a parameter that does not exist": lambda s: s["optimizer"]["state"].__setitem__(7, s["optimizer"]["state"][0]),
        "a parameter group listing one parameter less": lambda s: s["optimizer"]["param_groups"][0]["params"].pop(),
        "a learning rate of NaN": lambda s: s["optimizer"]["param_groups"][0].__setitem__("lr", float("nan")),
        "the scheduler state missing": lambda s: s.pop("scheduler"),
    }
    for what, change in consistent.items():
        k[f"optimizer: {what}, manifest re-recorded"] = Kind(O, _optim(change))
    k["optimizer: a list instead of an object, manifest re-recorded"] = Kind(
        O, _optim(lambda s: [s["optimizer"], s["scheduler"]], replace=True))

    def planted(f: Path) -> None:
        (f / O).write_bytes(pickle.dumps(_Planted()))
        _rerecord(f, O)
    k["optimizer: a pickle that is not tensors, manifest re-recorded"] = Kind(O, planted)
    k.update({key: v for key, v in _raw_kinds("state", S).items() if "bit" not in key})
    k["state: a list instead of an object, manifest re-recorded"] = Kind(S, _state(lambda s: [s], replace=True))
    consistent = {
        "step a string": lambda s: s.__setitem__("step", str(s["step"])),
        "step not the folder's": lambda s: s.__setitem__("step", s["step"] + 1),
        "position negative": lambda s: s.__setitem__("position", -1),
        "position a string": lambda s: s.__setitem__("position", "4"),
        "a Python RNG word out of range": lambda s: s["rng"]["python"][1].__setitem__(5, 2**40),
        "NumPy RNG keys cut short": lambda s: s["rng"]["numpy"].__setitem__(1, s["rng"]["numpy"][1][:100]),
        "a torch RNG byte over 255": lambda s: s["rng"]["torch"].__setitem__(3, 300),
        "rng missing": lambda s: s.pop("rng"),
        "the config of another version": lambda s: s["config"].__setitem__("version", 1),
        "no data position": lambda s: s.pop("position"),
    }
    for what, change in consistent.items():
        k[f"state: {what}, manifest re-recorded"] = Kind(S, _state(change))
    k["manifest: deleted"] = Kind(M, lambda f: (f / M).unlink())
    k["manifest: cut short (not JSON)"] = Kind(M, lambda f: _rewrite(f / M, lambda b: b[: len(b) // 2]))
    k["manifest: the weights' hash changed"] = Kind(W, lambda f: (f / M).write_text(
        (f / M).read_text().replace(json.loads((f / M).read_text())["files"][W]["sha256"], "0" * 64)))
    k["manifest: lists a file outside the folder"] = Kind(M, lambda f: (f / M).write_text(json.dumps(
        {"format": 1, "files": {**json.loads((f / M).read_text())["files"], "../escape": {"size": 1, "sha256": "0" * 64}}})))
    k["checkpoint folder emptied"] = Kind(S, lambda f: [p.unlink() for p in list(f.iterdir())])
    k["every checkpoint: optimizer emptied (0 bytes)"] = Kind(O, lambda f: (f / O).write_bytes(b""), every=True)
    k["every checkpoint: a NaN weight, manifests re-recorded"] = Kind(
        W, _weights(lambda t: t["0.weight"].view(-1).__setitem__(3, float("nan"))), every=True)
    return k


KINDS = _kinds()


def damaged_copy(built: Path, kind: str, work: Path) -> Path:
    """A copy of `built`'s checkpoints with `kind` applied; the copy's checkpoint root."""
    from agents.train.checkpoint import list_checkpoints

    root = work / kind.replace(" ", "_").replace(":", "").replace("/", "_").replace(",", "").replace("'", "")[:80]
    shutil.copytree(built / "checkpoints", root)
    found = list_checkpoints(root)
    for folder in found if KINDS[kind].every else found[-1:]:
        KINDS[kind].damage(folder)
    return root


# -- resuming from a damaged copy ---------------------------------------------------------------------------


def resume_outcome(built: Path, kind: str, root: Path) -> tuple[str, str]:
    """(outcome, detail) of resuming from `root` (a damaged copy) and training on to the last step."""
    import torch

    from agents.train.checkpoint import CheckpointError, load_newest_valid
    from agents.train.setup import check_run_state

    torch.set_num_threads(1)
    model, (optimizer, scheduler) = _model_and_optimizer(99)
    warnings = _Warnings()
    logging.getLogger("agents.train").addHandler(warnings)
    try:
        try:
            found = load_newest_valid(root, {"policy": model}, {"policy": (optimizer, scheduler)}, check=check_run_state)
        except CheckpointError as e:
            if not KINDS[kind].every:
                return "refused every checkpoint", str(e)[:300]
            return ("stopped with CheckpointError" if KINDS[kind].target in str(e) else "stopped, the error does not name "
                    "the file"), str(e).splitlines()[-1][:200]
        path, _ = found
        # Train on even after a silent load: what the damage does next (NaN weights, a crash in fused AdamW)
        # is part of the finding.
        for _ in range(int(path.name.split("-")[1]), STEPS):
            _train_step(model, optimizer, scheduler)
        if path.name == f"step-{SAVED[-1]:06d}":
            return "loaded silently", ""
        if not any(KINDS[kind].target in w for w in warnings.messages):
            return "fell back, the warning does not name the file", " | ".join(warnings.messages)[:300]
        if not _same(_state_of(model, optimizer), torch.load(built / "reference.pt", weights_only=True)):
            return "fell back, the resumed run differs", path.name
        return f"fell back to {path.name}, resumed exactly", warnings.messages[0][:200]
    except Exception as e:  # noqa: BLE001 - what escapes is the finding
        return f"untyped {type(e).__name__}", str(e)[:300]
    finally:
        logging.getLogger("agents.train").removeHandler(warnings)


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _worker(built: str, work: str, kinds: list[str], queue) -> None:
    logging.getLogger("agents").setLevel(logging.WARNING)
    for kind in kinds:
        queue.put(("start", kind, ""))
        root = damaged_copy(Path(built), kind, Path(work))
        queue.put(("done", *resume_outcome(Path(built), kind, root)))


def run_kinds(built: Path, kinds: list[str], work: Path, timeout_s: float = 300.0) -> dict[str, tuple[str, str]]:
    """The outcome of each kind, resumed in child processes: one runs them in turn, and when it dies the
    kind it was on is counted as `died` and a new one takes the rest."""
    ctx = mp.get_context("spawn")
    results: dict[str, tuple[str, str]] = {}
    while len(results) < len(kinds):
        left = [k for k in kinds if k not in results]
        queue = ctx.Queue()
        child = ctx.Process(target=_worker, args=(str(built), str(work), left, queue))
        child.start()
        current = None
        while True:
            try:
                event, a, b = queue.get(timeout=1.0)
            except Exception:  # noqa: BLE001 - queue.Empty: look whether the child is still alive
                if child.is_alive():
                    continue
                break
            if event == "start":
                current = a
            else:
                results[current] = (a, b)
                current = None
                if len(results) == len(kinds):
                    break
        child.join(timeout_s)
        if current is not None:
            code = child.exitcode
            why = signal.Signals(-code).name if code is not None and code < 0 else f"exit {code}"
            results[current] = (f"died ({why})", "")
    return results


def is_ok(outcome: str) -> bool:
    return outcome.startswith(("fell back to ", "stopped with CheckpointError"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="damage training checkpoints every way listed; fallbacks must be exact")
    p.add_argument("--kind", action="append", choices=sorted(KINDS))
    p.add_argument("--keep", help="build and damage the copies here instead of a temporary folder")
    args = p.parse_args(argv)
    kinds = args.kind or list(KINDS)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep or tmp)
        built = work / "built"
        build(built)
        results = run_kinds(built, kinds, work)
    outcomes: Counter = Counter()
    for kind in kinds:
        outcome, detail = results[kind]
        outcomes[outcome.split(" to step")[0].split(" (")[0]] += 1
        print(f"{'ok ' if is_ok(outcome) else 'BAD'} {kind:<66} {outcome:<40} {detail[:120]}", flush=True)
    good = sum(is_ok(results[k][0]) for k in kinds)
    print(f"{len(kinds)} damaged-checkpoint kinds: {good} fell back or stopped with a typed error; "
          + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    return 0 if good == len(kinds) else 1


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
