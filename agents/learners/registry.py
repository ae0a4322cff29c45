"""The learner registry: each learner module registers itself here, and the trainer asks only the registry.

A learner is a name, a config dataclass (a `GRPOConfig` subclass of its own), a function from rollout
trajectories to a `LearnerBatch`, what it needs from the env, and optionally a second trained model (COSEARCH's
ranker). Registration is a decorator on the batch function, the way verl's `register_adv_est` registers an
advantage estimator:

>>> from dataclasses import dataclass
>>> from agents.learners.grpo import GRPOConfig, batch_advantages
>>> @dataclass
... class MyConfig(GRPOConfig):
...     pass
>>> @register_learner("my-grpo", config=MyConfig)
... def my_batch(trajectories, config):
...     return batch_advantages(trajectories, config)
>>> get_learner("my-grpo").config is MyConfig
True
>>> unregister_learner("my-grpo")

The trainer never compares a learner's name: what differs between learners is in the `LearnerSpec`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from agents.learners.batch import LearnerBatch, Trajectory
from searchgym.errors import ConfigError

__all__ = [
    "EnvNeeds",
    "LearnerSpec",
    "SecondModel",
    "SecondModelContext",
    "get_learner",
    "learner_for_config",
    "learner_names",
    "register_learner",
    "unregister_learner",
]


@dataclass(frozen=True)
class EnvNeeds:
    """What a learner reads from step info that the env only writes when asked."""

    judge: bool = False
    """Per-round judge labels (`info["labels"]`, `info["episode"]["turn_labels"]`): the trainer builds the env
    with the run's judge (`EnvConfig.judge`)."""
    gold_entities: bool = False
    """Gold-entity match rates (`info["entities"]`): the env must match entities; `env_options` says how."""
    ranker: bool = False
    """A model ranker behind search (`info["ranker"]`); the learner's second model provides it."""
    env_options: Callable[[Any], dict[str, Any]] | None = None
    """Extra `gym.make` keyword arguments from the learner's config (e.g. E-GRPO's entity match rule); the
    run's own env options win over these."""

    def options(self, learner_config: Any) -> dict[str, Any]:
        """The env keyword arguments this learner asks for (before the run's judge and second model)."""
        return dict(self.env_options(learner_config)) if self.env_options is not None else {}


class SecondModel(ABC):
    """A second model a learner trains beside the policy (COSEARCH's ranker): a subclass of this class, which
    declares every member the trainer uses. The trainer holds it, puts `models` and `optimizers` into every
    checkpoint, builds envs with `env_options`, reads `gathers_env_calls` when it builds the rollout engine, calls
    `cold_start` once in a run that starts from step 0, `begin_step` before each step's rollouts and
    `train_step` after the policy's update, `release_memory` before the policy's update, `parts` when
    it lets idle tensors wait in files (`OptimConfig.park_idle`), and evaluates the policy inside `evaluating()`.
    A subclass must implement the abstract methods; `cold_start`, `release_memory`, `parts`, `gathers_env_calls`,
    `last_step` and `evaluating` have defaults (no cold start, nothing to free, its `models` and `optimizers`,
    no gathering, nothing to report, sampling as in training) to override."""

    models: dict[str, torch.nn.Module]
    """Checkpointed weights, by a name other than "policy"."""
    optimizers: dict[str, tuple[Any, Any]]
    """(optimizer, scheduler) per name in `models`."""

    gathers_env_calls: bool = False
    """True when its env options call a model from inside `env.step` through a
    `searchgym.backends.gather.GatheringBackend`: the trainer then steps each turn's episodes side by side
    (`RolloutConfig.gather_env_calls`) so that those calls go out as one batch."""

    def cold_start(self, env: Any) -> dict[str, float]:
        """Supervised training before RL, with the trainer's training env; returns namespaced metrics for the
        step-0 metrics line. The trainer calls it once in a run that starts from step 0, never on resume (the
        checkpoint holds the trained weights). By default there is none: no steps, no metrics."""
        return {}

    def release_memory(self) -> None:
        """Free what its sampler caches (kept KV rows, a bfloat16 copy of the weights) while the policy updates;
        the next sampling call makes it again. By default there is nothing to free."""

    def parts(self) -> tuple[list[torch.nn.Module], list[Any], list[torch.nn.Module]]:
        """Its trained modules, their optimizers, and the frozen modules its update reads (a KL's reference): what
        `OptimConfig.park_idle` lets wait in files while the policy samples or updates. By default `models`,
        `optimizers`' optimizers and no reference; a subclass whose `models` holds a reference overrides it."""
        return list(self.models.values()), [optimizer for optimizer, _ in self.optimizers.values()], []

    def last_step(self) -> dict[str, Any] | None:
        """What the last `train_step` trained on, as JSON values, for reports (COSEARCH's ranker: each call's
        reward and advantage, shown by the main job's credit view); None before any step, and by default."""
        return None

    def evaluating(self) -> AbstractContextManager:
        """A context the trainer evaluates the policy in: how the model samples while the policy is evaluated
        (COSEARCH's ranker decodes greedily there, as the policy does). By default nothing changes."""
        return nullcontext()

    @abstractmethod
    def env_options(self) -> dict[str, Any]:
        """`gym.make` keyword arguments that put the model into the env (e.g. a ranker)."""

    @abstractmethod
    def begin_step(self) -> None:
        """Forget what the previous step recorded."""

    @abstractmethod
    def train_step(self, trajectories: Sequence[Trajectory], env: Any) -> dict[str, float]:
        """Update on this step's trajectories (the env is the trainer's training env); returns namespaced
        metrics."""

    @abstractmethod
    def mark_restored(self) -> None:
        """Called after a checkpoint restored `models`: samplers must drop what they cached."""


@dataclass(frozen=True)
class SecondModelContext:
    """What the trainer lends a second model: its run settings and the trainer's own set-up routines, so a
    learner module needs nothing from `agents.train`."""

    learner_config: Any
    """The learner's config."""
    policy_model: str
    """The policy's model name (a second model may default to the same one)."""
    seed: int
    device: str
    micro_batch: int
    max_grad_norm: float
    load_model: Callable[[str, int], tuple[torch.nn.Module, Any]]
    """(model name, seed) -> (model, tokenizer) on the run's device."""
    optimizer: Callable[[torch.nn.Module], tuple[Any, Any]]
    """model -> (optimizer, scheduler) with the run's learning rate and warm-up."""
    policy_gradient_step: Callable[..., Any]
    """`agents.train.update.policy_gradient_step(model, trajectories, targets, settings, ...)`, `settings` being
    `learner_config.loss_settings(token_budget)` (the loss and its settings, read as for the policy). In a
    distributed run, its data-parallel form: called by every rank on its own rows, it divides by the whole
    step's loss denominator, leaves in `.grad` the gradient summed over the ranks (the one a single process
    would get from all rows) and returns the stats over every rank; every rank then clips and steps alike."""
    supervised_step: Callable[..., float] | None = None
    """`agents.train.sft.sft_step`: accumulates the gradient of the masked negative log-likelihood of
    examples (`token_ids`, `loss_mask`) and returns the loss; what a second model's cold start trains with."""
    rank: int = 0
    """This process's rank in a distributed run (0 otherwise); its trajectories are its contiguous share of
    the step's."""
    gather_objects: Callable[[Any], list[Any]] | None = None
    """Distributed: every rank's object, in rank order (each rank calls it); None in one process."""
    synchronize: Callable[[torch.nn.Module], None] | None = None
    """Distributed: copies rank 0's weights of a model into every rank's (each rank calls it); None in one
    process."""
    dtype: str = "float32"
    """The precision the run computes in, resolved (`float32` or `bfloat16`; `agents.precision`): a second
    model samples in it; `policy_gradient_step` and `supervised_step` already run in it."""


BatchFn = Callable[[Sequence[Trajectory], Any], LearnerBatch]


@dataclass(frozen=True)
class LearnerSpec:
    """One registered learner."""

    name: str
    config: type
    """Its config dataclass; one class per learner, so a config object names its learner."""
    batch: BatchFn
    """(trajectories in group-major order, config) -> `LearnerBatch`."""
    needs: EnvNeeds = EnvNeeds()
    second_model: Callable[[SecondModelContext], SecondModel] | None = None
    """Builds the second trained model (an instance of a `SecondModel` subclass), or None."""
    summary: str = ""
    """One line for `--help` and reports; defaults to the first line of the batch function's docstring."""

    def make_second_model(self, ctx: SecondModelContext) -> SecondModel | None:
        """The learner's second model built with `ctx`, or None when it has none. A factory that returns anything
        but a `SecondModel` is a `ConfigError`: the trainer calls the members that class declares."""
        if self.second_model is None:
            return None
        model = self.second_model(ctx)
        if not isinstance(model, SecondModel):
            raise ConfigError(f"learner {self.name!r}: its second_model factory returned a {type(model).__name__}, not an instance "
                              "of an agents.learners.registry.SecondModel subclass: make its class one")
        return model


_REGISTRY: dict[str, LearnerSpec] = {}


def register_learner(
    name: str,
    *,
    config: type,
    needs: EnvNeeds = EnvNeeds(),
    second_model: Callable[[SecondModelContext], SecondModel] | None = None,
    summary: str = "",
) -> Callable[[BatchFn], BatchFn]:
    """Decorator: register the decorated batch function as learner `name` with its config class."""
    from agents.learners.grpo import GRPOConfig

    if not isinstance(config, type) or not issubclass(config, GRPOConfig):
        raise ConfigError(f"learner {name!r}: config must be a GRPOConfig subclass (the loss reads its clip and KL settings), got {config!r}")

    def decorator(fn: BatchFn) -> BatchFn:
        if name in _REGISTRY and _REGISTRY[name].batch is not fn:
            raise ConfigError(f"a learner named {name!r} is already registered ({_REGISTRY[name].batch.__module__}); pick another name")
        for other in _REGISTRY.values():
            if other.config is config and other.name != name:
                raise ConfigError(f"learner {name!r} reuses {config.__name__}, the config of {other.name!r}: give it a subclass of its own")
        line = summary or ((fn.__doc__ or "").strip().splitlines() or [""])[0]
        _REGISTRY[name] = LearnerSpec(name, config, fn, needs, second_model, line)
        return fn

    return decorator


def unregister_learner(name: str) -> None:
    """Remove a learner (for tests and notebooks that register one temporarily)."""
    _REGISTRY.pop(name, None)


def _load_builtin() -> None:
    import agents.learners  # noqa: F401  (the reference learners register on import)


def get_learner(name: str) -> LearnerSpec:
    """The learner registered as `name`; a `ConfigError` lists the known names otherwise."""
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown learner {name!r}; registered: {', '.join(learner_names())}") from None


def learner_for_config(config: Any) -> LearnerSpec:
    """The learner whose config class is exactly `type(config)`."""
    _load_builtin()
    for spec in _REGISTRY.values():
        if type(config) is spec.config:
            return spec
    raise ConfigError(f"no learner is registered with config class {type(config).__name__}; register one with "
                      f"agents.learners.registry.register_learner")


def learner_names() -> tuple[str, ...]:
    """Registered learner names, in registration order."""
    _load_builtin()
    return tuple(_REGISTRY)
