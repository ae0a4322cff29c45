"""Named starting points for `python -m agents train --preset NAME`: the papers' model sizes on 80 GB GPUs.

A preset fills in `TrainConfig` fields (dotted names, as the flags spell them); any flag given on the command
line wins over the preset. The learner is not part of a preset (`--learner cw-grpo`, `--learner e-grpo`, ...),
nor is the env: point `--env.id` / `--env.data-path` at the questions you train on.

The training settings follow the official CW-GRPO run on Qwen3-8B (verl, 4 GPUs): 32 questions x 4 rollouts
a step, 200 steps, AdamW at 1e-6 with 57 warm-up steps (their ratio 0.285), micro-batches of one trajectory,
up to 8,192 response tokens and 10 assistant turns, activation checkpointing, 3 documents a search.
The layout is sized by `agents.train.memory_plan`'s estimate (`python -m agents.train.memory_plan --preset NAME`),
which the tests check: each preset's update fits an 80 GB GPU with room for the SGLang server that shares it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from searchgym.errors import ConfigError

PROMPT_TOKENS = 1024
"""Prompt length the memory plan allows for on top of `rollout.max_response_tokens` (the official run's
`max_prompt_length`): a micro-batch row is at most this plus the response."""

_PAPER = {
    "steps": 200,
    "questions_per_step": 32,
    "rollout.group_size": 4,
    "rollout.max_turn_tokens": 1024,
    "rollout.max_response_tokens": 8192,
    "rollout.backend": "sglang",
    "optim.lr": 1e-6,
    "optim.warmup_steps": 57,
    "optim.micro_batch": 1,
    "optim.gradient_checkpointing": True,
    "env.max_turns": 10,
    "env.top_k": 3,
    "device": "cuda",
    "checkpoint_every": 50,
}


@dataclass(frozen=True)
class TrainPreset:
    name: str
    summary: str
    shape: str
    """The model's shape in `agents.train.memory_plan.SHAPES`, for its memory estimate."""
    processes: int
    """Training processes (one per GPU) the layout is sized for: `torchrun --nproc_per_node` this many."""
    server_gb: float
    """GPU memory each co-located SGLang server needs (bf16 weights plus a KV cache for the step's rollouts):
    what the update must leave free on its GPU."""
    values: dict[str, Any] = field(default_factory=dict)
    """`TrainConfig` fields by dotted name (`optim.lr`)."""
    launch: str = ""
    """How to start the run, servers included."""

    @property
    def strategy(self) -> str:
        return "fsdp2" if self.values.get("sharding") == "fsdp2" else "ddp"

    @property
    def micro_batch_tokens(self) -> int:
        """Tokens of one micro-batch on one GPU: its rows at their longest."""
        return self.values["optim.micro_batch"] * (PROMPT_TOKENS + self.values["rollout.max_response_tokens"])

    def apply(self, args: argparse.Namespace) -> None:
        """Set every field of the preset that the command line left unset (None)."""
        for name, value in self.values.items():
            if getattr(args, name, None) is None:
                setattr(args, name, value)

    def check_processes(self, world_size: int) -> None:
        """A sharded preset on fewer processes than it is sized for would run out of GPU memory after loading."""
        if self.strategy == "fsdp2" and world_size < self.processes:
            raise ConfigError(
                f"preset {self.name!r} shards the update over {self.processes} GPUs and this run has {world_size} process(es); launch "
                f"with torchrun --nproc_per_node {self.processes}, or size another layout with python -m agents.train.memory_plan")


PRESETS = {
    p.name: p
    for p in (
        TrainPreset(
            "gpu-1.7b",
            "Qwen3-1.7B, one process per GPU (plain, or DDP with --distributed), one SGLang server on the same GPU",
            shape="qwen3-1.7b",
            processes=1,
            server_gb=24.0,
            values={**_PAPER, "model": "Qwen/Qwen3-1.7B", "rollout.weight_sync": "tensors",
                    "rollout.sglang_urls": ("http://127.0.0.1:30000",)},
            launch=("python -m sglang.launch_server --model-path Qwen/Qwen3-1.7B --port 30000 --mem-fraction-static 0.3 &\n"
                    "python -m agents train --preset gpu-1.7b --learner cw-grpo --env.id SearchQA-HotpotQA-v0 --env.data-path ..."),
        ),
        TrainPreset(
            "gpu-8b",
            "Qwen3-8B sharded with FSDP2 over 8 GPUs, one SGLang server per GPU behind SGLang's router",
            shape="qwen3-8b",
            processes=8,
            server_gb=28.0,
            values={**_PAPER, "model": "Qwen/Qwen3-8B", "distributed": True, "sharding": "fsdp2", "rollout.weight_sync": "disk",
                    "rollout.sglang_router": "http://127.0.0.1:30000"},
            launch=("for i in 0 1 2 3 4 5 6 7; do CUDA_VISIBLE_DEVICES=$i python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
                    "--port $((30001 + i)) --mem-fraction-static 0.35 & done\n"
                    "python -m sglang_router.launch_router --port 30000 --worker-urls http://127.0.0.1:3000{1..8} &\n"
                    "torchrun --nproc_per_node 8 -m agents train --preset gpu-8b --learner cw-grpo --env.id SearchQA-HotpotQA-v0 ..."),
        ),
    )
}


def get_preset(name: str) -> TrainPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}") from None
