"""One rank of the damaged sharded checkpoint check (`test_checkpoint_faults.py` starts two over gloo).

The ranks train a tiny LM sharded with FSDP2 for five steps, with sharded checkpoints after steps 1 to 3;
rank 0 records the whole weights and optimizer state at the end. Then, for each kind of damage, rank 0
damages a copy of the checkpoints, both ranks build a fresh sharded model (other initial weights) and
resume from the copy with `load_newest_sharded`, train on to step 5, and rank 0 writes one JSON line to
`OUT/outcomes.jsonl`: the kind, what happened (`fell back to step-N`, `stopped`, `loaded step-N`, or
`untyped <Exception>`), whether the warnings or the error named the damaged file, and whether the final
state equals the uninterrupted run's, bit for bit.

    python -m tests.reliability.sharded_faults OUT   (as each rank, with RANK, WORLD_SIZE, MASTER_ADDR/PORT)
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

STEPS, SAVED = 5, (1, 2, 3)


def _fresh(seed: int):
    from agents.train.fsdp import ShardedModel
    from agents.train.setup import load_model, make_optimizer

    lm, tokenizer = load_model("tiny", seed)
    sharded = ShardedModel(lm, torch.device("cpu"))
    optimizer, scheduler = make_optimizer(sharded.root, 0.01, 2, "fused")
    return sharded, optimizer, scheduler, tokenizer


def _step(sharded, optimizer, scheduler) -> None:
    # Every RNG feeds the batch, so a resume that restores any of them wrongly trains on other data.
    length = 6 + random.randrange(3) + int(np.random.randint(2))
    ids = torch.randint(3, 200, (2, length))
    logprobs = sharded.root(ids, torch.ones_like(ids))
    (-logprobs.mean()).backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def _full_state(sharded, optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    model, optim = get_state_dict(sharded.root, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {"model": model, "optim": optim}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _seed(seed: int) -> None:
    from agents.train.setup import seed_everything

    seed_everything(seed)


# -- damage (rank 0, between barriers) ------------------------------------------------------------------------


def _rewrite_shards(folder: Path, change) -> None:
    """Rewrite the DCP shards with `change` applied to the whole state, and record the new files in the
    manifest, as a writer that wrote wrong values would have."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp

    from agents.train.checkpoint_checks import write_manifest

    whole = folder / "whole.pt"
    dcp_to_torch_save(folder / "policy.dcp", whole)
    state = torch.load(whole, weights_only=False)
    change(state)
    torch.save(state, whole)
    shutil.rmtree(folder / "policy.dcp")
    torch_save_to_dcp(whole, folder / "policy.dcp")
    whole.unlink()
    write_manifest(folder)


def _first_shard(folder: Path) -> Path:
    return sorted((folder / "policy.dcp").glob("*.distcp"))[0]


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _rerecorded_state(folder: Path, change) -> None:
    from agents.train.checkpoint_checks import write_manifest

    state = json.loads((folder / "state.json").read_text())
    change(state)
    (folder / "state.json").write_text(json.dumps(state))
    write_manifest(folder)


def _exp_avg_halved(state: dict) -> None:
    entry = next(iter(state["optim"]["state"].values()))
    entry["exp_avg"] = entry["exp_avg"][: entry["exp_avg"].shape[0] // 2].clone()


def _nan_weight(state: dict) -> None:
    name = next(n for n, t in state["model"].items() if t.dim() == 2)
    state["model"][name][0, 0] = float("nan")


KINDS = {
    # kind: (the file the warning must name, damage, every checkpoint)
    "a shard: one bit flipped": (".distcp", lambda f: _flip(_first_shard(f)), False),
    "the shards' metadata: emptied": (".metadata", lambda f: (f / "policy.dcp" / ".metadata").write_bytes(b""), False),
    "scheduler: emptied": ("policy.scheduler.pt", lambda f: (f / "policy.scheduler.pt").write_bytes(b""), False),
    "state: a torch RNG byte over 255, manifest re-recorded": (
        "state.json", lambda f: _rerecorded_state(f, lambda s: s["rng"]["torch"].__setitem__(0, 999)), False),
    "shards: exp_avg of another shape, rewritten consistently": ("policy.dcp", lambda f: _rewrite_shards(f, _exp_avg_halved), False),
    "shards: a NaN weight, rewritten consistently": ("policy.dcp", lambda f: _rewrite_shards(f, _nan_weight), False),
    "manifest: deleted": ("manifest.json", lambda f: (f / "manifest.json").unlink(), False),
    "every checkpoint: a shard emptied": (".distcp", lambda f: _first_shard(f).write_bytes(b""), True),
}


class _Messages(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _try(kind: str, built: Path, work: Path, reference: dict | None) -> dict | None:
    from agents.train.checkpoint import CheckpointError, list_checkpoints
    from agents.train.sharded_checkpoint import load_newest_sharded

    target, damage, every = KINDS[kind]
    root = work / kind.replace(" ", "_").replace(":", "").replace(",", "").replace("'", "")
    if dist.get_rank() == 0:
        shutil.copytree(built, root)
        found = list_checkpoints(root)
        for folder in found if every else found[-1:]:
            damage(folder)
    dist.barrier()
    sharded, optimizer, scheduler, _ = _fresh(seed=99)
    messages = _Messages()
    logging.getLogger("agents.train").addHandler(messages)
    try:
        found = load_newest_sharded(root, sharded, optimizer, scheduler)
        outcome = f"fell back to {found[0].name}" if found[0].name != f"step-{SAVED[-1]:06d}" else f"loaded {found[0].name}"
        for _ in range(int(found[0].name.split("-")[1]), STEPS):
            _step(sharded, optimizer, scheduler)
        final = _full_state(sharded, optimizer)
        same = reference is not None and _same(final, reference)
    except CheckpointError as e:
        outcome, same = "stopped", None
        messages.messages.append(str(e))
    except Exception as e:  # noqa: BLE001 - what escapes is the finding
        outcome, same = f"untyped {type(e).__name__}: {str(e)[:200]}", None
    finally:
        logging.getLogger("agents.train").removeHandler(messages)
    return {"kind": kind, "every": every, "outcome": outcome, "named": any(target in m for m in messages.messages),
            "same_as_uninterrupted": same, "messages": [m[:300] for m in messages.messages]}


def main(out: Path) -> None:
    from agents.train.sharded_checkpoint import save_sharded

    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    logging.getLogger("agents").setLevel(logging.WARNING)
    built, work = out / "built", out / "work"
    _seed(0)
    sharded, optimizer, scheduler, tokenizer = _fresh(seed=0)
    for step in range(1, STEPS + 1):
        _step(sharded, optimizer, scheduler)
        if step in SAVED:
            save_sharded(built, step, sharded, optimizer, scheduler, tokenizer, {"position": step}, keep=len(SAVED))
    reference = _full_state(sharded, optimizer)
    for kind in KINDS:
        result = _try(kind, built, work, reference if dist.get_rank() == 0 else None)
        if dist.get_rank() == 0:
            with open(out / "outcomes.jsonl", "a") as f:
                f.write(json.dumps(result) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(Path(sys.argv[1]))
