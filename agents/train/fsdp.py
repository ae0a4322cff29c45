"""Sharded updates with FSDP2 (`torch.distributed.fsdp.fully_shard`): `TrainConfig.sharding="fsdp2"`.

Each decoder layer and the root are sharded over the ranks: a rank keeps 1/N of every weight, of its
gradient and of the optimizer states, and gathers a layer's whole weights only while that layer runs.
The root is `LogprobModel`, whose forward is the loss's logprob computation (`token_logprobs`: the
decoder, then the output embedding on the loss-mask positions only), so the embeddings and the final norm
are gathered and their gradients reduced by FSDP's own hooks although the loss never calls the causal
LM's forward.

Gradient semantics are the data-parallel path's (`agents.train.distributed`): every rank divides its loss
by the step's global denominator, so the sum of the ranks' gradients is the single-process gradient.
FSDP2's reduce-scatter divides by the number of ranks by default (it assumes each rank's loss is a mean
over its own share); the divide factor is set to 1 so that the reduction is that sum. FSDP reduces after
every backward, so every rank must run as many forward/backward passes as the others: a rank with fewer
micro-batches (dropped or excluded trajectories) runs zero-weighted passes (`pad_passes`), whose
gradient is exactly 0.

Whole weights are gathered only where they are needed, one bucket of at most `bucket_bytes` at a time
(`full_tensors`): to refresh the in-process rollout replica, to write a `save_pretrained` folder for the
SGLang servers (`save_pretrained_streamed`), never the whole model twice in one process.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import torch
import torch.distributed as dist

from agents.rollout.batch import token_logprobs
from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)
T = TypeVar("T")

BUCKET_BYTES = 256 * 2**20
"""Default size of one bucket of gathered weights."""


class LogprobModel(torch.nn.Module):
    """The root FSDP module around a causal LM: `forward` is `token_logprobs(lm, ..., dtype=dtype)`.

    Its state-dict keys are the LM's with the prefix `lm.`."""

    def __init__(self, lm: torch.nn.Module, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.lm = lm
        self.dtype = dtype

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, temperature: float = 1.0,
                positions: torch.Tensor | None = None) -> torch.Tensor:
        return token_logprobs(self.lm, input_ids, attention_mask, temperature=temperature, positions=positions, dtype=self.dtype)


def mixed_precision_dtype(device: torch.device) -> torch.dtype | None:
    """bfloat16 parameters for the compute where the device supports it (CUDA with bf16), None (float32
    parameters) elsewhere: on CPU the root's autocast (`TrainConfig.dtype`, `agents.precision`) decides the
    matmuls' precision and keeps the vocabulary projection float32, as the in-process sampler does."""
    if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return None


class ShardedModel:
    """A causal LM sharded with FSDP2 over every rank of the default process group.

    `lm` is sharded in place (its parameters become DTensor shards); `root` is what the loss calls and what
    the optimizer and the checkpoints see. Where FSDP2 keeps float32 parameters (CPU), `autocast` is the
    precision of the forward passes (`agents.precision`; `TrainConfig.dtype`)."""

    def __init__(self, lm: torch.nn.Module, device: torch.device, *, cpu_offload: bool = False, autocast: torch.dtype = torch.float32):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, fully_shard

        if not dist.is_initialized() or dist.get_world_size() < 2:
            raise ConfigError("sharding='fsdp2' needs at least 2 processes (torchrun or accelerate launch --num_processes N): "
                              "with one process there is nothing to shard; drop the option")
        if cpu_offload and device.type != "cuda":
            raise ConfigError("cpu_offload=True moves parameters and optimizer states from the GPU to host memory; "
                              f"the model is on {device.type}, so leave it off")
        self.device = device
        self.world = dist.get_world_size()
        mesh = init_device_mesh(device.type, (self.world,))
        kwargs: dict = {"mesh": mesh}
        dtype = mixed_precision_dtype(device)
        if dtype is not None:
            # Reductions in float32: summing bf16 gradients over ranks would round each partial sum.
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
        if cpu_offload:
            kwargs["offload_policy"] = CPUOffloadPolicy()
        self.compute_dtype = dtype or autocast
        layers = getattr(lm.get_decoder(), "layers", None)
        if layers is None:
            raise ConfigError(f"{type(lm).__name__} has no decoder.layers to shard one by one; sharding='fsdp2' supports "
                              "decoder-only transformers models (Llama, Qwen, SmolLM)")
        for layer in layers:
            fully_shard(layer, **kwargs)
        self.root = LogprobModel(lm, torch.float32 if dtype is not None else autocast)
        fully_shard(self.root, **kwargs)
        for module in self.root.modules():
            if isinstance(module, FSDPModule):
                # A sum, not FSDP's default mean over ranks: each rank's loss already carries the step's
                # global denominator (see the module docstring).
                module.set_gradient_divide_factor(1.0)
                # Plain SUM collectives: a divide factor other than the world size is otherwise a
                # PREMUL_SUM, which gloo lacks (NCCL has it, and SUM costs it nothing).
                module.set_force_sum_reduction_for_comms(True)
        self.lm = lm
        logger.info("sharded %s over %d ranks with FSDP2: %d decoder layers and the root, compute in %s%s", type(lm).__name__,
                    self.world, len(layers), str(self.compute_dtype).removeprefix("torch."), ", CPU offload" if cpu_offload else "")

    def parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.root.parameters() if p.requires_grad]

    # -- the update ---------------------------------------------------------------------------------------

    def accumulate(self, rows: int, micro_batch: int, pad_id: int, max_grad_norm: float, run: Callable[[], T]) -> tuple[T, torch.Tensor]:
        """`run()` (the micro-batch passes over this rank's `rows` trajectories), then zero-weighted passes up
        to the most any rank runs, then gradient clipping; returns `run`'s result and the norm before
        clipping. The pass count is agreed on before any pass: FSDP2 reduce-scatters after every backward,
        so a rank still in a pass's all-gather would otherwise meet another's all-reduce."""
        mine = passes(rows, micro_batch)
        most = self.max_passes(mine)
        result = run()
        self.pad_passes(mine, most, pad_id)
        return result, self.clip_grad_norm_(max_grad_norm)

    def max_passes(self, local: int) -> int:
        """The most forward/backward passes any rank runs this step."""
        t = torch.tensor([local], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def pad_passes(self, local: int, total: int, pad_id: int) -> None:
        """Run `total - local` zero-weighted forward/backward passes, so that this rank joins every
        reduce-scatter the others start; their gradient is exactly 0."""
        for _ in range(total - local):
            ids = torch.full((1, 2), pad_id, dtype=torch.long, device=self.device)
            attention = torch.ones_like(ids)
            positions = torch.tensor([[0.0, 1.0]], device=self.device)
            (self.root(ids, attention, positions=positions).sum() * 0.0).backward()

    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Clip the sharded gradients to global norm `max_norm`, as `torch.nn.utils.clip_grad_norm_` does on
        whole ones; returns the norm before clipping. Every element lives on exactly one rank, so the sum of
        the ranks' local squared norms is the whole gradient's."""
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        local = [g.to_local() if hasattr(g, "to_local") else g for g in grads]
        sq = torch.zeros((), dtype=torch.float64, device=self.device)
        for g in local:
            sq += g.detach().double().pow(2).sum().to(self.device)
        dist.all_reduce(sq)
        norm = sq.sqrt().float()
        coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        for g in local:
            g.detach().mul_(coef.to(g.device))
        return norm

    # -- whole weights --------------------------------------------------------------------------------------

    def full_tensors(self, bucket_bytes: int = BUCKET_BYTES, *, cpu: bool = True) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """The LM's whole weights (its state-dict names, tied weights once, persistent buffers too) in
        buckets of at most `bucket_bytes` (a larger tensor is a bucket of its own), on the CPU (or, with
        `cpu=False`, where the gather leaves them).

        A collective: every rank must iterate to the end. Each tensor is gathered when its bucket is filled
        and the caller drops a bucket before the next, so a rank holds its shards plus one bucket."""
        names = dict(self.lm.named_parameters())  # deduplicated: a tied weight appears once
        persistent = set(self.lm.state_dict().keys())
        names.update({n: b for n, b in self.lm.named_buffers() if n in persistent})
        bucket: list[tuple[str, torch.Tensor]] = []
        size = 0
        for name, tensor in names.items():
            whole = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            whole = whole.detach()
            if cpu and whole.device.type != "cpu":
                whole = whole.to("cpu")
            nbytes = whole.numel() * whole.element_size()
            if bucket and size + nbytes > bucket_bytes:
                yield bucket
                bucket, size = [], 0
            bucket.append((name, whole))
            size += nbytes
        if bucket:
            yield bucket

    def copy_into(self, model: torch.nn.Module, bucket_bytes: int = BUCKET_BYTES) -> None:
        """Copy the whole weights into `model` (a plain replica of the same LM), bucket by bucket."""
        params = dict(model.named_parameters())
        params.update(dict(model.named_buffers()))
        with torch.no_grad():
            # Not through the CPU: the replica lives where the shards do (or on the GPU when they are offloaded).
            for bucket in self.full_tensors(bucket_bytes, cpu=False):
                for name, whole in bucket:
                    params[name].copy_(whole)

    def save_pretrained_streamed(self, folder: str | Path, tokenizer=None, *, write: bool, bucket_bytes: int = BUCKET_BYTES) -> Path:
        """A `save_pretrained` folder (safetensors shards, their index, config, tokenizer) of the whole
        weights, one bucket per shard file. Every rank calls it (the gather is a collective); only the rank
        with `write=True` writes."""
        from safetensors.torch import save_file

        folder = Path(folder)
        if write:
            folder.mkdir(parents=True, exist_ok=True)
            for stale in folder.glob("model*.safetensors*"):
                stale.unlink()
        weight_map: dict[str, str] = {}
        files: list[str] = []
        total = 0
        for i, bucket in enumerate(self.full_tensors(bucket_bytes)):
            if not write:
                continue
            name = f"model-{i + 1:05d}.safetensors"
            save_file({n: t.contiguous() for n, t in bucket}, str(folder / name), metadata={"format": "pt"})
            files.append(name)
            for n, t in bucket:
                weight_map[n] = name
                total += t.numel() * t.element_size()
        if write:
            # Renamed to the -of- form once the count is known, as save_pretrained names them.
            final = {f: f.replace(".safetensors", f"-of-{len(files):05d}.safetensors") for f in files}
            for old, new in final.items():
                (folder / old).rename(folder / new)
            index = {"metadata": {"total_size": total}, "weight_map": {n: final[f] for n, f in weight_map.items()}}
            (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
            self.lm.config.save_pretrained(folder)
            if getattr(self.lm, "generation_config", None) is not None:
                self.lm.generation_config.save_pretrained(folder)
            if tokenizer is not None:
                tokenizer.save_pretrained(folder)
        dist.barrier()
        return folder


def passes(rows: int, micro_batch: int) -> int:
    """Forward/backward passes `policy_gradient_step` runs over `rows` trajectories."""
    return math.ceil(rows / micro_batch)
