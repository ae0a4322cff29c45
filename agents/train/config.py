"""`TrainConfig`: every option of a training run, shared by the Python API and the CLI.

A run's options are nested by component, each field documented once: the learner's own config
(`TrainConfig.learner`, a registered learner's config dataclass, `agents.learners.registry`), the env
(`EnvConfig`), rollout sampling (`RolloutConfig`, the rollout engine's own config from `agents.rollout`,
starting here from `training_rollout()`) and the optimiser (`OptimConfig`). The CLI flags follow the
nesting: `--learner.alpha`, `--env.hops`, `--rollout.group-size`, `--optim.lr`.

>>> config = TrainConfig(learner="cw-grpo", env=EnvConfig(hops=(1, 2)), optim=OptimConfig(lr=1e-5))
>>> (config.learner_name, config.learner.kl_coef, config.env.hops, config.rollout.group_size)
('cw-grpo', 0.001, (1, 2), 4)
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from agents.learners.grpo import GRPOConfig
from agents.learners.registry import get_learner, learner_for_config
from agents.memory import MMAP_THRESHOLD, check_mmap_threshold
from agents.precision import PRECISIONS, Precision
from agents.rollout.config import RolloutConfig
from searchgym.errors import ConfigError
from searchgym.threads import check_threads

Sharding = Literal["none", "fsdp2"]
EvalSplit = Literal["test", "validation"]
ColdStartShows = Literal["retriever", "gold"]

TRAINING_ROLLOUT: dict[str, Any] = {"group_size": 4, "max_turn_tokens": 48, "max_response_tokens": 384}
"""A training run's rollout settings where they differ from `RolloutConfig`'s own defaults (the engine's:
one sample per question, 512-token turns, 4096-token responses): groups of 4 and the CPU preset's budgets.
`TrainConfig()` and `python -m agents train` start from these; a `RolloutConfig` you pass yourself starts
from the class defaults, so state its group and budgets."""


def training_rollout(**changes: Any) -> RolloutConfig:
    """`TrainConfig.rollout`'s default (`TRAINING_ROLLOUT`) with `changes` applied.

    >>> training_rollout(group_size=8).max_turn_tokens
    48
    """
    return RolloutConfig(**{**TRAINING_ROLLOUT, **changes})


def _at_least(config: Any, minimum: int, *names: str) -> None:
    for name in names:
        if getattr(config, name) < minimum:
            raise ConfigError(f"{type(config).__name__}.{name} must be >= {minimum}, got {getattr(config, name)}")


@dataclass
class EnvConfig:
    """The env the questions come from (`gym.make` arguments)."""

    id: str = "SearchQA-Synthetic-v0"
    """A searchgym id; the synthetic world is the offline default."""
    num_entities: int = 1000
    """Synthetic world size (ignored by other envs)."""
    hops: tuple[int, ...] = (1,)
    """Synthetic question hop counts."""
    num_questions: int = 200
    """Training questions drawn from the world's train split."""
    world_seed: int | None = None
    """Seed of the synthetic world (its entities, corpus and questions); None: the run's `seed`. Fixing it
    keeps one world, and one set of evaluation questions, across runs that differ only in their RL seed."""
    max_turns: int = 3
    """Env turns per episode."""
    top_k: int = 2
    """Documents shown per search (fewer tokens per observation on CPU)."""
    data_path: str | None = None
    """Question file for non-synthetic envs."""
    corpus_path: str | None = None
    """Corpus file for non-synthetic envs."""
    eval_split: EvalSplit = "test"
    """The synthetic world's questions the run evaluates on: `test`, or `validation` (a world built with
    `options={"validation_fraction": ...}`), the questions to choose a setting on."""
    train_questions: int | None = None
    """For an env over a question file: train on its first `train_questions` questions and evaluate on those
    after them (held out, searching the same paragraphs); None trains and evaluates on the file's questions
    from its first."""
    judge: str | None = "gold"
    """The judge of learners that read per-round labels (CW-GRPO): `gold` (rules over the gold annotations),
    or None; a `Judge` object (e.g. an `LLMJudge`) goes in through `options={"judge": ...}`."""
    options: dict = field(default_factory=dict)
    """Further keyword arguments for `gym.make` (checked by the env, so a typo is an error); they win over
    what the learner asks for."""

    def __post_init__(self) -> None:
        _at_least(self, 1, "max_turns", "top_k", "num_questions", "num_entities")
        if self.eval_split not in get_args(EvalSplit):
            raise ConfigError(f"EnvConfig.eval_split must be one of {get_args(EvalSplit)}, got {self.eval_split!r}")
        synthetic = self.id == "SearchQA-Synthetic-v0"
        if self.eval_split != "test" and not synthetic:
            raise ConfigError(f"EnvConfig.eval_split={self.eval_split!r} picks synthetic questions; over a question file "
                              "hold questions out with train_questions")
        if self.train_questions is not None and (synthetic or self.train_questions < 1):
            raise ConfigError(f"EnvConfig.train_questions must be None or >= 1, and is for question files (the synthetic world "
                              f"has splits); got {self.train_questions} with {self.id}")
        if self.world_seed is not None and self.world_seed < 0:
            raise ConfigError(f"EnvConfig.world_seed must be None or >= 0, got {self.world_seed}")
        self.hops = tuple(int(h) for h in self.hops)
        if not isinstance(self.options, dict):
            raise ConfigError(f"EnvConfig.options must be a dict of gym.make arguments, got {type(self.options).__name__}")


def _check_training_rollout(rollout: RolloutConfig, optim: OptimConfig) -> None:
    """What a training run asks of `RolloutConfig` beyond what the rollout engine does."""
    if rollout.group_size < 2:
        raise ConfigError(f"TrainConfig.rollout.group_size must be >= 2: GRPO normalizes rewards within a group, got "
                          f"{rollout.group_size} (RolloutConfig's own default is one sample; training_rollout() has 4)")
    if not rollout.temperature > 0:
        raise ConfigError(f"rollout temperature must be > 0 (the loss divides logits by it), got {rollout.temperature}")
    if rollout.top_p != 1.0 or rollout.top_k != 0:
        raise ConfigError(f"a training run samples from the whole distribution (rollout.top_p=1, top_k=0; got {rollout.top_p}, "
                          f"{rollout.top_k}): the update's ratio compares the sampler's logprobs with the policy's full "
                          "distribution at the rollout temperature, which truncated sampling would bias")
    if rollout.seed is not None:
        raise ConfigError(f"leave rollout.seed None in a training run (got {rollout.seed}): every step's sampling is seeded "
                          "from TrainConfig.seed (--seed), so that a resumed run samples what the uninterrupted one did")
    if optim.cold_start_steps and (rollout.system_prompt is not None or not rollout.use_chat_template):
        raise ConfigError("the cold start trains on the chat-templated prompt without a system message (agents.train.sft), so "
                          "rollout.system_prompt and use_chat_template=False would show the policy another format than "
                          "the one it learned; drop them or the cold start (optim.cold_start_steps=0)")


ADAMW_IMPLEMENTATIONS = ("fused", "foreach", "for-loop")


@dataclass
class OptimConfig:
    """The optimiser of the RL update and of the supervised cold start."""

    lr: float = 2e-6
    """AdamW learning rate of the RL updates (and of a learner's second model)."""
    warmup_steps: int = 1
    """Linear learning-rate warm-up, in updates."""
    micro_batch: int = 4
    """Trajectories per forward/backward; gradients accumulate over the step (micro-batches are formed from
    trajectories of similar length, and the gradient does not depend on their size)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of keeping them, and the
    vocabulary logits `agents.rollout.batch.HEAD_CHUNK` scored tokens at a time: about a third more update
    compute for a fraction of the activation memory; the same gradient within float noise."""
    park_idle: bool = False
    """Let what a phase of the step does not read wait in files under `out_dir/parked` (`agents.memory.Parking`):
    during rollouts and evaluations the optimizers' states and the KL references, during the policy's update
    a second model's weights, states and reference, during a second model's update and cold start the
    policy's. The same numbers (written and read back bit for bit, tested) in less memory, for seconds of file
    traffic a step: COSEARCH on CPU holds two models, each with AdamW states twice its size. One process on a
    CPU only (no `distributed`, no `sharding`)."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm before each optimizer step."""
    adamw: str = "fused"
    """torch's AdamW implementation: `fused` (one kernel per weight: no temporary copies of the weights and
    the fastest step; torch >= 2.4 on CPU), `foreach` (torch's default: batched, with temporaries as large
    as the weights) or `for-loop`. The same update within float rounding."""
    lora: bool = False
    """Train LoRA adapters (peft) instead of every weight."""
    lora_rank: int = 16
    """Rank of the LoRA adapters (their alpha is twice the rank)."""
    cold_start_steps: int = 0
    """Supervised steps on the synthetic world's oracle trajectories before RL (E-GRPO's cold start)."""
    cold_start_batch: int = 8
    """Oracle trajectories per cold-start step."""
    cold_start_lr: float = 1e-4
    """AdamW learning rate of the cold start."""
    cold_start_skip: int = 0
    """Batches of the cold start's seeded question stream passed over before its first step: a cold start
    continued from an earlier one's weights (same seed) takes up where that one stopped instead of
    repeating its batches."""
    cold_start_shows: ColdStartShows = "retriever"
    """What the oracle trajectories' searches show: the env's own order (`retriever`), or the question's
    gold passages first (`gold`, `searchgym.rankers.GoldPassageRanker`), so that each oracle turn reads its
    fact from a document that states it where the retriever's first one does not (a world with decoy
    passages, HotpotQA's paragraphs)."""

    def __post_init__(self) -> None:
        _at_least(self, 1, "micro_batch", "cold_start_batch", "lora_rank")
        if self.lr <= 0 or self.cold_start_lr <= 0:
            raise ConfigError("learning rates must be > 0")
        if self.warmup_steps < 0 or self.cold_start_steps < 0 or self.cold_start_skip < 0:
            raise ConfigError("warmup_steps, cold_start_steps and cold_start_skip must be >= 0")
        if not self.max_grad_norm > 0:
            raise ConfigError(f"max_grad_norm must be > 0, got {self.max_grad_norm}")
        if self.cold_start_shows not in get_args(ColdStartShows):
            raise ConfigError(f"cold_start_shows must be one of {get_args(ColdStartShows)}, got {self.cold_start_shows!r}")
        if self.adamw not in ADAMW_IMPLEMENTATIONS:
            raise ConfigError(f"adamw must be one of {', '.join(ADAMW_IMPLEMENTATIONS)}, got {self.adamw!r}")


@dataclass
class TrainConfig:
    """One training run. Defaults are the CPU preset on the 1-hop synthetic world with SmolLM2-135M."""

    learner: Any = "grpo"
    """The learner: a registered name (grpo, cw-grpo, e-grpo, cosearch, ...) for its default options, or its
    config object (e.g. `CWGRPOConfig(alpha=1.0)`); a name becomes the default config object."""
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=training_rollout)
    """How rollouts are sampled (`agents.rollout.RolloutConfig`); by default `training_rollout()`: groups of
    4, 48-token turns and 384-token responses."""
    optim: OptimConfig = field(default_factory=OptimConfig)

    model: str = "smollm2-135m"
    """Policy: `smollm2-135m`, a local folder, a hub id (online), or `tiny` (a random 2-layer model for tests)."""
    device: str = "cpu"
    """Where the trained model (and a learner's second model) lives and updates: `cpu`, `cuda`, `cuda:1`, ..."""
    dtype: Precision = "auto"
    """The precision the trained models compute in (`agents.precision`), in rollouts, evaluations, the
    update and the cold starts alike: `bfloat16` runs the decoder's matrix products in bfloat16 (the update
    under autocast, the sampler on a bfloat16 copy of the linear weights), while the weights, the optimizer
    states, the vocabulary projection, logprobs, loss, advantages and KL stay float32; `float32` runs
    everything in float32; `auto` is bfloat16 on a CPU with native bfloat16 instructions (`avx512_bf16`,
    `amx_bf16`, Arm `bf16`: about twice the float32 matmul rate) and float32 elsewhere. Checkpoints record
    the precision a run computed in; a resume is exact at the same one. A resume in the other one continues
    with a warning, or is refused (`CheckpointError`) when the checkpoint holds a cold-started KL reference,
    which a bfloat16 run keeps with bfloat16 linear weights."""
    distributed: bool = False
    """Data-parallel update under `accelerate` (DDP): launch with `accelerate launch --num_processes N -m agents
    train --distributed ...`; each process rolls out and updates on its share of every step's questions
    (questions_per_step must be divisible by N) and process 0 logs, checkpoints and pushes weights. With one
    process the results equal a run without it. `device` is then `cpu` or `cuda` (each process's own GPU)."""
    sharding: Sharding = "none"
    """How a distributed update holds the weights: `none`, a whole replica per process (DDP); `fsdp2`, each
    decoder layer and the root sharded over the processes with FSDP2 (`agents.train.fsdp`): weights,
    gradients and optimizer states take 1/N of the memory each, bfloat16 compute where the GPU supports it,
    float32 parameters computing in `dtype` on CPU. Needs `distributed=True` and at least 2 processes; checkpoints are then sharded
    (`torch.distributed.checkpoint`), `python -m agents export` turns one into a model folder."""
    cpu_offload: bool = False
    """With `sharding="fsdp2"` on GPUs: keep the parameter shards and the optimizer states in host memory
    (FSDP2's `CPUOffloadPolicy`) and run the optimizer step there; slower, for models whose shards do not
    fit next to the activations."""
    steps: int = 8
    """RL updates."""
    questions_per_step: int = 4
    """B: questions per update."""
    eval_questions: int = 0
    """Held-out test-split questions evaluated (greedy) before training and after the last step."""
    seed: int = 0
    """Seeds the model's initialisation, the question order and every step's sampling."""
    threads: int | None = None
    """Threads for torch, numba, FAISS and BLAS in this process (None: the physical cores it may use;
    `searchgym.threads`). On a shared machine, fewer threads than cores can be faster."""
    malloc_mmap_threshold: int | None = MMAP_THRESHOLD
    """Fix glibc's mmap threshold at this many bytes for the process (`agents.memory.tune_allocator`; 1 MiB by
    default): freed tensors go back to the OS instead of fragmenting the heap, for gigabytes less peak memory
    and faster decoding, at the cost of page faults in the update (measured in docs/learners.md, "CPU
    precision (bfloat16)", and docs/experiment-log.md). 0 or None keeps glibc's own behaviour; elsewhere
    than glibc it changes nothing."""
    huge_pages: bool = True
    """Back torch's CPU tensors of 2 MB and more with transparent huge pages (`agents.memory.ask_huge_pages`):
    a third of the page faults for the fresh mappings the mmap threshold gives every large tensor, at the same
    peak memory; the cpu preset's float32 update 0.98-1.18x as fast over three pairs (within noise). It reaches the process only before its first CPU
    tensor, and every process it starts; `THP_MEM_ALLOC_ENABLE` in the environment wins. No arithmetic changes."""
    out_dir: str = "runs/train"
    """Checkpoints, metrics.jsonl, caches and pushed weights go here."""
    checkpoint_every: int = 1
    """Save a checkpoint every this many updates (0: only at the end)."""
    resume: bool = True
    """Continue from the newest checkpoint in `out_dir` when there is one."""
    tensorboard: bool = False
    """Also write TensorBoard events under `out_dir/tb` (the tensorboard package, in the `agents` extra;
    checked when the config is built, so a missing package stops the run before any step)."""

    def __post_init__(self) -> None:
        if self.tensorboard and importlib.util.find_spec("tensorboard") is None:
            raise ConfigError("tensorboard=True (--tensorboard) needs the tensorboard package: pip install tensorboard "
                              "(it is in searchgym's agents extra), or leave the flag off: metrics.jsonl has every metric")
        if isinstance(self.learner, str):
            self.learner = get_learner(self.learner).config()
        elif not isinstance(self.learner, GRPOConfig):
            raise ConfigError(f"learner must be a registered learner's name or config object, got {self.learner!r}")
        spec = learner_for_config(self.learner)
        for name, kind in (("env", EnvConfig), ("rollout", RolloutConfig), ("optim", OptimConfig)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"TrainConfig.{name} must be an {kind.__name__}, got {getattr(self, name)!r}")
        _check_training_rollout(self.rollout, self.optim)
        _at_least(self, 1, "steps", "questions_per_step")
        if self.dtype not in PRECISIONS:
            raise ConfigError(f"dtype must be one of {', '.join(PRECISIONS)}, got {self.dtype!r}")
        check_mmap_threshold(self.malloc_mmap_threshold)
        check_threads(self.threads)
        if self.eval_questions < 0 or self.checkpoint_every < 0:
            raise ConfigError("eval_questions and checkpoint_every must be >= 0")
        if self.sharding == "fsdp2" and spec.second_model is not None:
            raise ConfigError(f"sharding='fsdp2' does not shard learner={spec.name!r}'s second model: it trains data-parallel, a whole "
                              "replica on every rank; drop --sharding (plain --distributed) or train it in one process")
        if self.sharding not in get_args(Sharding):
            raise ConfigError(f"sharding must be one of {get_args(Sharding)}, got {self.sharding!r}")
        if self.sharding == "fsdp2":
            if not self.distributed:
                raise ConfigError("sharding='fsdp2' shards the update over the processes of a distributed run: add --distributed and "
                                  "launch with torchrun --nproc_per_node N (or accelerate launch --num_processes N), N >= 2")
            if self.optim.lora:
                raise ConfigError("sharding='fsdp2' cannot be combined with lora=True: LoRA adapters are small enough for the "
                                  "data-parallel update; drop --sharding or --optim.lora")
            if self.rollout.backend == "sglang" and self.rollout.weight_sync == "tensors":
                raise ConfigError("sharding='fsdp2' pushes weights to SGLang by disk (gathered bucket by bucket into a model folder); "
                                  "set weight_sync='disk'")
        if self.cpu_offload and (self.sharding != "fsdp2" or not self.device.startswith("cuda")):
            raise ConfigError("cpu_offload=True moves FSDP2 shards from the GPUs to host memory: it needs sharding='fsdp2' and "
                              f"device='cuda' (got sharding={self.sharding!r}, device={self.device!r})")
        if self.rollout.backend == "sglang" and self.optim.lora:
            raise ConfigError("rollout backend 'sglang' cannot be combined with lora=True: the servers load full weights, "
                              "and LoRA adapters are not merged for them; train every weight or roll out with 'hf'")
        if self.optim.park_idle and (self.distributed or not self.device.startswith("cpu")):
            raise ConfigError("optim.park_idle lets tensors wait in files while one process trains on a CPU: drop it with "
                              f"distributed=True or device={self.device!r} (on GPUs, sharding='fsdp2' with cpu_offload=True offloads)")

    @property
    def learner_name(self) -> str:
        """The registered name of `learner`."""
        return learner_for_config(self.learner).name
