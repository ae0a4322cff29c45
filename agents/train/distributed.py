"""Data-parallel pieces of the trainer, over an `accelerate.Accelerator` (DDP across processes).

With N processes (`accelerate launch --num_processes N -m agents train --distributed ...`) every rank
rolls out its contiguous share of the step's questions (whole GRPO groups), computes its targets and the
gradient of its share with the step's global loss denominator, and the ranks' gradients are summed: the
result is the single-process gradient of the whole batch. The sum is one all-reduce after the
micro-batches (backward under DDP's `no_sync`) rather than DDP's per-backward averaging, because ranks
can hold different numbers of micro-batches (dropped or excluded trajectories) and DDP needs equal
counts, and because the loss calls the decoder and the output embedding separately (only the positions
in the loss mask reach the vocabulary projection), which DDP's forward does not cover.

Accelerate's own distributed types are DDP-style only (`MULTI_CPU`, `MULTI_GPU` or one process): the
trainer shards the model itself when asked (`TrainConfig.sharding="fsdp2"`, `agents.train.fsdp`), so an
accelerate FSDP or DeepSpeed config is refused rather than wrapping the model a second way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from searchgym.errors import ConfigError

SUMMED = frozenset({"rollout/episodes", "rollout/sampled_tokens", "rollout/included"})
"""Metrics that count things over the batch: summed over ranks (every other metric is a per-trajectory
mean, and ranks hold equal numbers of trajectories, so it is averaged)."""


def world_size() -> int:
    """Processes of this launch (`torchrun` and `accelerate launch` set WORLD_SIZE; 1 without them)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def make_accelerator(device: str):
    """The `Accelerator` of a distributed run on `device` (`cpu` or `cuda`; each process gets its own GPU)."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedType

    if device not in ("cpu", "cuda"):
        raise ConfigError(f"with distributed=True, device must be 'cpu' or 'cuda' (each process uses its local GPU), got {device!r}")
    # The scheduler steps once per update: accelerate would otherwise step it once per process.
    accelerator = Accelerator(cpu=device == "cpu", step_scheduler_with_optimizer=False)
    supported = (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU)
    if accelerator.distributed_type not in supported:
        raise ConfigError(f"distributed training launches plain processes (accelerate's MULTI_GPU or MULTI_CPU), not "
                          f"{accelerator.distributed_type.value}: run `accelerate launch` without an FSDP/DeepSpeed config, and "
                          "pass --sharding fsdp2 for a sharded update (the trainer shards the model itself)")
    return accelerator


def shard(items: Sequence, rank: int, world: int) -> list:
    """Rank `rank`'s contiguous share of `items` (whose length `world` divides)."""
    if len(items) % world:
        raise ConfigError(f"{len(items)} items cannot be split evenly over {world} processes")
    size = len(items) // world
    return list(items[rank * size : (rank + 1) * size])


def all_reduce_sum(accelerator, values: Sequence[float]) -> list[float]:
    """Each value summed over ranks (float64 on the accelerator's device)."""
    t = torch.tensor(list(values), dtype=torch.float64, device=accelerator.device)
    return [float(v) for v in accelerator.reduce(t, reduction="sum").tolist()]


def sum_gradients(accelerator, params: Iterable[torch.nn.Parameter]) -> None:
    """Replace every parameter's `.grad` by its sum over ranks, in one flat all-reduce.

    A parameter without a gradient on some rank (no trajectory of its share entered the loss) takes part
    with zeros; one without a gradient on every rank keeps `grad=None`, as in a single process (so the
    optimizer skips it there too)."""
    params = [p for p in params if p.requires_grad]
    if not params:
        return
    has = accelerator.reduce(torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=accelerator.device), reduction="sum")
    live = [p for p, h in zip(params, has.tolist()) if h > 0]
    if not live:
        return
    for p in live:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    # Note: one flat copy of the gradients; the all-reduce is a synchronization point of all ranks.
    flat = accelerator.reduce(torch.cat([p.grad.reshape(-1) for p in live]), reduction="sum")
    offset = 0
    for p in live:
        n = p.grad.numel()
        p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
        offset += n


def merge_metrics(accelerator, metrics: dict[str, float]) -> dict[str, float]:
    """One rank's metrics combined over ranks: counts summed, `time/...` the slowest rank's, every other
    metric averaged (a rank that lacks one, e.g. a `rollout/end/...` share, counts as 0)."""
    from accelerate.utils import gather_object

    gathered: list[dict[str, Any]] = gather_object([metrics])
    keys = list(dict.fromkeys(k for m in gathered for k in m))
    out = {}
    for k in keys:
        values = [float(m.get(k, 0.0)) for m in gathered]
        if k in SUMMED:
            out[k] = sum(values)
        elif k.startswith("time/"):
            out[k] = max(values)
        else:
            out[k] = sum(values) / len(values)
    return out


def data_parallel_step(accelerator, model: torch.nn.Module, trajectories: Sequence, targets, settings, **kwargs):
    """`policy_gradient_step` of a second model (a whole replica on every rank) over the whole step: this
    rank's rows with the step's denominator, then the gradients summed over ranks (see the trainer's `update`)."""
    from agents.train.metrics import global_stats
    from agents.train.update import loss_rows, policy_gradient_step

    rows, tokens = loss_rows(trajectories, targets)
    total_tokens, total_rows = all_reduce_sum(accelerator, [tokens, len(rows)])
    local = policy_gradient_step(model, trajectories, targets, settings, denominator=settings.denominator(total_tokens, total_rows), **kwargs)
    sum_gradients(accelerator, model.parameters())
    return global_stats(accelerator, local, total_tokens)


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's `obj`, in rank order (each rank calls it)."""
    from accelerate.utils import gather_object

    return gather_object([obj])


def broadcast_weights(world: int, model: torch.nn.Module) -> None:
    """Rank 0's weights of `model` into every rank's."""
    if world > 1:
        for tensor in model.state_dict().values():
            torch.distributed.broadcast(tensor, src=0)
