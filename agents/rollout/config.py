"""`RolloutConfig`: how episodes are sampled, for the rollout engine and for a training run alike.

One class serves both. The engine reads the sampling fields; a training run (`TrainConfig.rollout`) reads
them too, and the fields that say which policy samples (`backend`, the SGLang servers, `weight_sync`,
`sglang_timeout_s`, `reuse_kv`, `max_batch_rows`): the engine itself samples with whatever `Policy` it is
given. The defaults are the engine's (one sample per question, generous budgets for a real model); a
training run starts from its own (`agents.train.config.TRAINING_ROLLOUT`: groups of 4, the CPU preset's
budgets).

>>> RolloutConfig(group_size=8, max_turn_tokens=256).max_response_tokens
4096
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from agents.policies.base import SamplingParams
from searchgym.errors import ConfigError

RolloutBackend = Literal["hf", "sglang"]
"""Who samples a training run's rollouts (`RolloutConfig.backend`)."""
WeightSync = Literal["disk", "tensors"]
"""How new weights reach a training run's SGLang servers (`RolloutConfig.weight_sync`)."""


@dataclass(frozen=True)
class RolloutConfig:
    """How episodes are sampled: group size, sampling, budgets, prompts, and (in training) who samples."""

    group_size: int = 1
    """G: samples per question (the GRPO group)."""
    temperature: float = 1.0
    """Sampling temperature (0: greedy). A training run's loss divides the logits by the same."""
    top_p: float = 1.0
    """Nucleus sampling: sample from the smallest set of tokens holding this much probability (1: off)."""
    top_k: int = 0
    """Sample from the k most likely tokens only (0: off)."""
    max_turn_tokens: int = 512
    """Tokens the policy may write in one turn."""
    max_response_tokens: int = 4096
    """Tokens after the prompt in the whole episode (agent turns plus observations); beyond it the episode
    ends as `over_long`."""
    max_obs_tokens: int | None = None
    """Observations longer than this many tokens are cut to it (None: never)."""
    stop: tuple[str, ...] | None = None
    """Stop strings; None uses the closing tags of the env's action grammar."""
    system_prompt: str | None = None
    """A system message placed before the env's prompt (None: whatever the chat template adds)."""
    use_chat_template: bool = True
    """Wrap the env's prompt in the tokenizer's chat template as a user message; False feeds it raw."""
    stop_on_invalid: bool = False
    """End an episode at its first unparseable action (`format_error`) instead of letting the env explain."""
    env_workers: int = 1
    """Threads stepping envs (more than 1 helps with retrieval servers or LLM judges)."""
    gather_env_calls: bool = False
    """Step every live episode of a turn in a thread of its own, so that the model calls their envs make
    through a `searchgym.backends.gather.GatheringBackend` (COSEARCH's ranker) go out as one batch per
    turn (`step_side_by_side`; `env_workers` is then not used). A training run turns it on for learners
    that ask for it."""
    seed: int | None = None
    """Seeds every sampling call (derived per call), for reproducible rollouts with `HFPolicy`. A training
    run seeds its rollouts from its own `seed` and leaves this None."""
    backend: RolloutBackend = "hf"
    """Training: who samples the rollouts: `hf`, the trained model itself in this process; `sglang`, the
    servers in `sglang_urls`, which get the new weights after every update (the update itself stays in this
    process)."""
    sglang_urls: tuple[str, ...] = ()
    """Training: SGLang servers (`http://host:port`) for `backend="sglang"`, each serving the same model with
    the same tokenizer; each turn's prompts are dealt over them round robin (`FanOutPolicy`)."""
    sglang_router: str | None = None
    """Training: instead of `sglang_urls`, the url of an SGLang router (`python -m
    sglang_router.launch_router`) in front of the servers. Generation goes through the router, which spreads
    requests over its workers and sends a request to another worker when one does not answer; weight pushes
    go to every worker the router lists, and each worker's version is checked (`RouterPolicy`)."""
    weight_sync: WeightSync = "disk"
    """Training: how new weights reach the servers: `disk`, safetensors written to `out_dir/rollout-weights`
    and loaded with `/update_weights_from_disk` (the servers must read that folder); `tensors`,
    `/update_weights_from_tensor` through shared memory or CUDA IPC (trainer and servers on one host, and
    `sglang` importable in the trainer's process)."""
    sglang_timeout_s: float = 300.0
    """Training: seconds one SGLang request may take before it is retried; a server that stays silent ends
    the run with a BackendTimeout, one that refuses connections with a BackendError within seconds."""
    reuse_kv: bool = True
    """Training: in-process rollouts keep each episode's KV cache between turns and prefill only the new
    tokens (`HFPolicyConfig.reuse_kv`); False re-prefills every turn's whole context (the older path)."""
    max_batch_rows: int = 64
    """Training: episodes (rows) the in-process policy decodes together at most; a step's rollouts are
    split into chunks of this many (`HFPolicyConfig.max_batch_rows`)."""

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ConfigError(f"group_size must be >= 1, got {self.group_size}")
        if self.max_turn_tokens < 1 or self.max_response_tokens < 1:
            raise ConfigError("max_turn_tokens and max_response_tokens must be >= 1")
        if self.max_obs_tokens is not None and self.max_obs_tokens < 1:
            raise ConfigError(f"max_obs_tokens must be >= 1 or None, got {self.max_obs_tokens}")
        if self.env_workers < 1:
            raise ConfigError(f"env_workers must be >= 1, got {self.env_workers}")
        if self.max_batch_rows < 1:
            raise ConfigError(f"max_batch_rows must be >= 1, got {self.max_batch_rows}")
        if isinstance(self.stop, list):
            object.__setattr__(self, "stop", tuple(self.stop))  # as the command line and JSON give it
        if self.stop is not None and (not isinstance(self.stop, tuple) or not all(self.stop)):
            raise ConfigError(f"stop must be None or a tuple of non-empty strings, got {self.stop!r}")
        # Validates temperature, top_p and top_k early, with SamplingParams' messages.
        SamplingParams(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)
        self._check_servers()

    def _check_servers(self) -> None:
        if isinstance(self.sglang_urls, str):
            raise ConfigError(f"sglang_urls must be a sequence of urls, got the string {self.sglang_urls!r}; write ({self.sglang_urls!r},)")
        object.__setattr__(self, "sglang_urls", tuple(self.sglang_urls))  # a list from JSON or the CLI, kept hashable
        if self.backend not in get_args(RolloutBackend):
            raise ConfigError(f"rollout backend must be one of {get_args(RolloutBackend)}, got {self.backend!r}")
        if self.weight_sync not in get_args(WeightSync):
            raise ConfigError(f"weight_sync must be one of {get_args(WeightSync)}, got {self.weight_sync!r}")
        if not self.sglang_timeout_s > 0:
            raise ConfigError(f"sglang_timeout_s must be > 0, got {self.sglang_timeout_s}")
        if self.backend == "hf":
            if self.sglang_urls or self.sglang_router:
                raise ConfigError("sglang_urls or sglang_router is set but the rollout backend is 'hf', which samples in process; "
                                  "set backend='sglang' to use the servers")
            return
        if self.sglang_router is not None:
            if self.sglang_urls:
                raise ConfigError("set sglang_urls (the servers, dealt round robin) or sglang_router (a router in front of them), not both")
            if not isinstance(self.sglang_router, str) or not self.sglang_router.startswith(("http://", "https://")):
                raise ConfigError(f"sglang_router must start with http:// or https://, got {self.sglang_router!r}")
            return
        if not self.sglang_urls:
            raise ConfigError("rollout backend 'sglang' needs at least one server in sglang_urls, e.g. ('http://127.0.0.1:30000',), "
                              "or a router's url in sglang_router")
        for url in self.sglang_urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(f"every sglang_urls entry must start with http:// or https://, got {url!r}")
        if len({u.rstrip("/") for u in self.sglang_urls}) != len(self.sglang_urls):
            raise ConfigError(f"sglang_urls lists a server twice: {self.sglang_urls}")
