"""`TrainConfig`: every option of a training run, shared by the Python API and the CLI."""

from __future__ import annotations

import importlib.util

import math
from dataclasses import dataclass, field
from typing import Literal

from searchgym.errors import ConfigError

LearnerName = Literal["grpo", "cw-grpo", "e-grpo", "cosearch"]
LEARNERS: tuple[str, ...] = ("grpo", "cw-grpo", "e-grpo", "cosearch")
RolloutBackend = Literal["hf", "sglang"]
WeightSync = Literal["disk", "tensors"]


@dataclass
class TrainConfig:
    """One training run. Defaults are the CPU preset on the 1-hop synthetic world with SmolLM2-135M."""

    learner: LearnerName = "grpo"
    """Which method computes rewards and advantages: grpo, cw-grpo, e-grpo or cosearch."""
    env_id: str = "SearchQA-Synthetic-v0"
    """A searchgym id; the synthetic world is the offline default."""
    num_entities: int = 1000
    """Synthetic world size (ignored by other envs)."""
    hops: tuple[int, ...] = (1,)
    """Synthetic question hop counts."""
    num_questions: int = 200
    """Training questions drawn from the world's train split."""
    max_turns: int = 3
    """Env turns per episode."""
    top_k: int = 2
    """Documents shown per search (fewer tokens per observation on CPU)."""
    data_path: str | None = None
    """Question file for non-synthetic envs."""
    corpus_path: str | None = None
    """Corpus file for non-synthetic envs."""

    model: str = "smollm2-135m"
    """Policy: `smollm2-135m`, a local folder, a hub id (online), or `tiny` (a random 2-layer model for tests)."""
    ranker_model: str | None = None
    """COSEARCH's ranker policy; None uses the same model name as the agent (a separate copy)."""
    lora: bool = False
    """Train LoRA adapters (peft) instead of every weight."""
    lora_rank: int = 16
    device: str = "cpu"
    """Where the trained model (and COSEARCH's ranker) lives and updates: `cpu`, `cuda`, `cuda:1`, ..."""
    distributed: bool = False
    """Data-parallel update under `accelerate` (DDP): launch with `accelerate launch --num_processes N -m agents
    train --distributed ...`; each process rolls out and updates on its share of every step's questions
    (questions_per_step must be divisible by N) and process 0 logs, checkpoints and pushes weights. With one
    process the results equal a run without it. `device` is then `cpu` or `cuda` (each process's own GPU)."""

    steps: int = 8
    """RL updates."""
    questions_per_step: int = 4
    """B: questions per update."""
    group_size: int = 4
    """G: rollouts per question."""
    lr: float = 2e-6
    warmup_steps: int = 1
    """Linear learning-rate warm-up, in updates."""
    micro_batch: int = 4
    """Trajectories per forward/backward; gradients accumulate over the step."""
    max_grad_norm: float = 1.0
    eps_low: float = 0.2
    eps_high: float = 0.28
    kl_coef: float = 0.0
    """k3 KL to a frozen copy of the starting policy; 0 is KL-free (DAPO, E-GRPO)."""
    aggregation: Literal["token-mean", "seq-mean", "seq-mean-token-sum-norm"] = "token-mean"
    dynamic_sampling: bool = False
    alpha: float | None = None
    """The learner's own alpha: CW-GRPO's contribution temperature (default inf), E-GRPO's entity-reward
    weight (default 0.3), COSEARCH's format penalty (default 0.2). Ignored by GRPO."""

    temperature: float = 1.0
    rollout_backend: RolloutBackend = "hf"
    """Who samples the rollouts: `hf`, the trained model itself in this process; `sglang`, the servers in
    `sglang_urls`, which get the new weights after every update (the update itself stays in this process)."""
    sglang_urls: tuple[str, ...] = ()
    """SGLang servers (`http://host:port`) for `rollout_backend="sglang"`, each serving the same model with
    the same tokenizer; each turn's prompts are dealt over them round robin."""
    weight_sync: WeightSync = "disk"
    """How new weights reach the servers: `disk`, safetensors written to `out_dir/rollout-weights` and loaded
    with `/update_weights_from_disk` (the servers must read that folder); `tensors`,
    `/update_weights_from_tensor` through shared memory or CUDA IPC (trainer and servers on one host, and
    `sglang` importable in the trainer's process)."""
    sglang_timeout_s: float = 300.0
    """Seconds one SGLang request may take before it is retried; a server that stays silent ends the run
    with a BackendTimeout, one that refuses connections with a BackendError within seconds."""
    max_turn_tokens: int = 48
    max_response_tokens: int = 384

    cold_start_steps: int = 0
    """Supervised steps on the synthetic world's oracle trajectories before RL (E-GRPO's cold start)."""
    cold_start_batch: int = 8
    cold_start_lr: float = 1e-4

    eval_questions: int = 0
    """Held-out test-split questions evaluated (greedy) before training and after the last step."""
    seed: int = 0
    out_dir: str = "runs/train"
    checkpoint_every: int = 1
    """Save a checkpoint every this many updates (0: only at the end)."""
    resume: bool = True
    """Continue from the newest checkpoint in `out_dir` when there is one."""
    tensorboard: bool = False
    """Also write TensorBoard events under `out_dir/tb` (the tensorboard package, in the `agents` extra;
    checked when the config is built, so a missing package stops the run before any step)."""
    env_options: dict = field(default_factory=dict)
    """Extra keyword arguments for `gym.make` (checked by the env, so a typo is an error)."""

    def __post_init__(self) -> None:
        if self.tensorboard and importlib.util.find_spec("tensorboard") is None:
            raise ConfigError("tensorboard=True (--tensorboard) needs the tensorboard package: pip install tensorboard "
                              "(it is in searchgym's agents extra), or leave the flag off: metrics.jsonl has every metric")
        if self.learner not in LEARNERS:
            raise ConfigError(f"learner must be one of {LEARNERS}, got {self.learner!r}")
        for name in ("steps", "questions_per_step", "group_size", "micro_batch", "max_turns", "top_k", "max_turn_tokens", "max_response_tokens", "cold_start_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError("group_size must be >= 2: GRPO normalizes rewards within a group")
        if self.lr <= 0 or self.cold_start_lr <= 0:
            raise ConfigError("learning rates must be > 0")
        if self.alpha is not None and (math.isnan(self.alpha) or self.alpha < 0):
            raise ConfigError(f"alpha must be >= 0, got {self.alpha}")
        self.hops = tuple(int(h) for h in self.hops)
        if self.distributed and self.learner == "cosearch":
            raise ConfigError("distributed=True does not support learner='cosearch': its ranker groups calls across the whole "
                              "step's trajectories and trains a second model; run COSEARCH in one process")
        self._check_rollout_backend()

    def _check_rollout_backend(self) -> None:
        if isinstance(self.sglang_urls, str):
            raise ConfigError(f"sglang_urls must be a sequence of urls, got the string {self.sglang_urls!r}; write ({self.sglang_urls!r},)")
        self.sglang_urls = tuple(self.sglang_urls)
        if self.rollout_backend not in ("hf", "sglang"):
            raise ConfigError(f"rollout_backend must be 'hf' or 'sglang', got {self.rollout_backend!r}")
        if self.weight_sync not in ("disk", "tensors"):
            raise ConfigError(f"weight_sync must be 'disk' or 'tensors', got {self.weight_sync!r}")
        if not self.sglang_timeout_s > 0:
            raise ConfigError(f"sglang_timeout_s must be > 0, got {self.sglang_timeout_s}")
        if self.rollout_backend == "hf":
            if self.sglang_urls:
                raise ConfigError("sglang_urls is set but rollout_backend is 'hf', which samples in process; set rollout_backend='sglang' to use the servers")
            return
        if not self.sglang_urls:
            raise ConfigError("rollout_backend='sglang' needs at least one server in sglang_urls, e.g. ('http://127.0.0.1:30000',)")
        for url in self.sglang_urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(f"every sglang_urls entry must start with http:// or https://, got {url!r}")
        if len({u.rstrip("/") for u in self.sglang_urls}) != len(self.sglang_urls):
            raise ConfigError(f"sglang_urls lists a server twice: {self.sglang_urls}")
        if self.lora:
            raise ConfigError("rollout_backend='sglang' cannot be combined with lora=True: the servers load full weights, "
                              "and LoRA adapters are not merged for them; train every weight or roll out with 'hf'")
