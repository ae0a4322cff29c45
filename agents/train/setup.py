"""Set-up routines of a training run: device check, seeding, model loading, LoRA, optimizers, the rollout
sampler. Each is a plain function of the config, so the trainer only calls them."""

from __future__ import annotations

import importlib.util
import json
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.models import TinyModelConfig, build_tiny_model, load_model_and_tokenizer
from agents.train.checkpoint import CheckpointError
from searchgym.errors import BackendError, ConfigError

CONFIG_VERSION = 2
"""The layout of the config saved in checkpoints; 2: options nested as learner, env, rollout and optim."""


def load_model(name: str, seed: int, device: str = "cpu"):
    """(model, tokenizer): `tiny` is a random 2-layer model seeded by `seed`; anything else is loaded."""
    if name == "tiny":
        torch.manual_seed(seed)
        model, tokenizer = build_tiny_model(TinyModelConfig())
        return model.to(device), tokenizer
    return load_model_and_tokenizer(name, dtype="float32", device=device)


def check_device(device: str) -> None:
    try:
        kind = torch.device(device).type
    except RuntimeError as e:
        raise ConfigError(f"device must be cpu, cuda or cuda:N, got {device!r}") from e
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but torch sees no CUDA device here; use device='cpu'")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def enable_activation_checkpointing(model) -> None:
    """Recompute each decoder layer's activations in the backward pass (`OptimConfig.gradient_checkpointing`).
    Non-reentrant: works when the inputs need no grad (frozen embeddings, LoRA) and under DDP's no_sync."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x; the older name warns there
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def with_lora(model, rank: int):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], lora_dropout=0.0))


def adamw(params, lr: float, implementation: str = "fused") -> torch.optim.AdamW:
    """torch's AdamW without weight decay, in `implementation` (`OptimConfig.adamw`)."""
    kwargs = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}[implementation]
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, **kwargs)
    except RuntimeError as e:  # fused needs torch >= 2.4 on CPU, and floating-point weights on CPU or CUDA
        raise ConfigError(f"AdamW's {implementation} implementation is not available here ({e}); set optim.adamw='foreach'") from e


def make_optimizer(model: torch.nn.Module, lr: float, warmup_steps: int, implementation: str = "fused"):
    """(AdamW over the trainable weights, a linear warm-up scheduler)."""
    optimizer = adamw([p for p in model.parameters() if p.requires_grad], lr, implementation)
    warmup = max(warmup_steps, 1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    return optimizer, scheduler


def rollout_policy(config, policy, tokenizer, rank: int):
    """What samples rollouts: the trained `policy` itself (`hf`), a FanOutPolicy over SGLang clients that
    all answer /health, or a RouterPolicy over an SGLang router that answers /health and lists workers."""
    c = config
    if c.rollout.backend == "hf":
        return policy
    if c.rollout.weight_sync == "tensors" and importlib.util.find_spec("sglang") is None:
        raise ConfigError("weight_sync='tensors' needs the sglang package importable in the trainer's process "
                          "(pip install 'searchgym[sglang]'); use weight_sync='disk' otherwise")
    from agents.policies.fanout import FanOutPolicy
    from agents.policies.http import HTTPConfig
    from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig

    http = HTTPConfig(timeout_s=c.rollout.sglang_timeout_s)
    if c.rollout.sglang_router is not None:
        from agents.policies.router import RouterPolicy, RouterPolicyConfig

        router = RouterPolicy(RouterPolicyConfig(url=c.rollout.sglang_router, http=http), tokenizer=tokenizer)
        if not router.health(timeout_s=min(10.0, c.rollout.sglang_timeout_s)):
            router.close()
            raise BackendError(f"no SGLang router answers /health at {c.rollout.sglang_router}; start it first "
                               "(python -m sglang_router.launch_router, see docs/learners.md) or fix sglang_router")
        # A router started a moment ago answers /health before it has registered its --worker-urls.
        wait_s = min(10.0, c.rollout.sglang_timeout_s)
        deadline = time.monotonic() + wait_s
        while not router.workers():
            if time.monotonic() >= deadline:
                router.close()
                raise BackendError(f"the SGLang router at {c.rollout.sglang_router} listed no workers within {wait_s:g}s; "
                                   "start it with --worker-urls")
            time.sleep(0.5)
        return router
    fan = FanOutPolicy([SGLangPolicy(SGLangPolicyConfig(url=url, http=http), tokenizer=tokenizer) for url in c.rollout.sglang_urls])
    fan.assign(rank)  # ranks start their round robin on different servers
    down = [m.config.url for m in fan.members if not m.health(timeout_s=min(10.0, c.rollout.sglang_timeout_s))]
    if down:
        fan.close()
        raise BackendError(f"no SGLang server answers /health at {', '.join(down)}; start them first "
                           "(python -m sglang.launch_server, see docs/learners.md) or fix sglang_urls")
    return fan


def jsonable_config(config) -> dict[str, Any]:
    """The config as JSON values, with the learner's registered name and the layout version."""
    out = json.loads(json.dumps(asdict(config), default=str))
    return {"version": CONFIG_VERSION, "learner_name": config.learner_name, **out}


def eval_split(config) -> str:
    """The split the run evaluates on: the synthetic world's `EnvConfig.eval_split`; for a question file,
    `heldout` (the questions after `train_questions`) or `train` (the training questions)."""
    e = config.env
    if e.id == "SearchQA-Synthetic-v0":
        return e.eval_split
    return "heldout" if e.train_questions is not None else "train"


def env_kwargs(config, split: str, cache_dir: Path) -> dict[str, Any]:
    """`gym.make` keyword arguments of the run's env for `split` (the synthetic world's train, test or
    validation split; for a question file `train`, or `heldout`: `eval_split`), before what the learner
    asks for."""
    e = config.env
    kwargs: dict[str, Any] = dict(max_turns=e.max_turns, top_k=e.top_k, cache_dir=cache_dir, **e.options)
    if e.id == "SearchQA-Synthetic-v0":
        kwargs.update(num_entities=e.num_entities, hops=e.hops, split=split, seed=config.seed if e.world_seed is None else e.world_seed,
                      num_questions=e.num_questions if split == "train" else max(config.eval_questions, 1))
    else:
        kwargs.update(data_path=e.data_path, corpus_path=e.corpus_path)
        if e.train_questions is not None:
            kwargs["limit" if split == "train" else "offset"] = e.train_questions
    return kwargs


def check_run_state(path: Path, state: dict[str, Any]) -> None:
    """Refuse a checkpoint whose `state.json` lacks what a run resumes from (the data position, the config)
    or whose config layout this version cannot read, before any weight is loaded. (Their types and ranges,
    and the rest of the checkpoint, are checked by `agents.train.checkpoint_checks`.)"""
    missing = [key for key in ("position", "config") if key not in state]
    if missing:
        raise CheckpointError(f"{path / 'state.json'} lacks {', '.join(missing)}: it was not written by a training run; "
                              "resume from another checkpoint or start a new out_dir")
    check_config_version(path, state)


def check_config_version(path: Path, state: dict[str, Any]) -> None:
    """Refuse a checkpoint whose config layout this version cannot read, before any weight is loaded."""
    version = (state.get("config") or {}).get("version", 1)
    if version != CONFIG_VERSION:
        raise CheckpointError(f"{path / 'state.json'}: written with training config version {version}, this is version "
                              f"{CONFIG_VERSION} (options now nested: learner, env, rollout, optim); start a new out_dir "
                              "or resume with the searchgym version that wrote it")


def check_processes(config, world: int) -> None:
    """The settings that must fit the number of processes (`world`) a run was started with."""
    if config.questions_per_step % world:
        raise ConfigError(f"questions_per_step={config.questions_per_step} must be divisible by the {world} processes: "
                          "each rolls out whole questions (GRPO groups)")
    if config.sharding == "fsdp2" and world < 2:
        raise ConfigError("sharding='fsdp2' needs at least 2 processes (torchrun --nproc_per_node N or accelerate launch "
                          "--num_processes N, N >= 2): with one there is nothing to shard; drop --sharding")
    if config.optim.cold_start_steps > 0 and config.optim.cold_start_batch % world:
        raise ConfigError(f"cold_start_batch={config.optim.cold_start_batch} must be divisible by the {world} processes")
