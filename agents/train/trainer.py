"""The training loop: sample questions, roll out, score, compute advantages, update, sync.

The loop is all `Trainer` does; the learner (`agents.learners.registry`) turns trajectories into targets and
may train a second model, and set-up (`setup`), weight sync (`sync`), metrics (`metrics`), evaluation
(`evaluate`), the update (`update`), cold start (`sft`) and checkpoints (`checkpoint`) are their own files.

`Trainer(TrainConfig(...)).run()` trains one learner. Every `checkpoint_every` updates it saves model,
optimizer, scheduler, RNG states and the data position atomically; with `resume=True` a restarted run
continues from the newest checkpoint and reproduces the uninterrupted run (rollouts are seeded per step,
so a resumed step samples what the original would have; metrics lines logged after the restored checkpoint
are dropped, so each step keeps exactly one). Metrics go to `out_dir/metrics.jsonl` with namespaced names
(`rollout/...`, `loss/...`, `eval/...`) and optionally to TensorBoard.

Rollouts are sampled by the trained model itself (`rollout_backend="hf"`) or by SGLang servers
(`"sglang"`): the trainer pushes its weights to every server when it starts (fresh or resumed), after the
cold start and after every optimizer step, and checks that each server reports the new weight version
before it samples again. The teacher-forced update always runs here, on `device`. SGLang servers ignore
the per-step sampling seed (unless started with deterministic inference), so with them a resumed run
redraws the same questions from the same weights but not the same samples.

With `distributed=True` the update is data parallel over the processes `accelerate launch` started
(`agents.train.distributed`): each rank rolls out its share of the step's questions, seeded by (seed,
step, rank), and the summed gradient equals the single-process one over the same trajectories; rank 0
alone writes metrics and checkpoints and pushes weights to the SGLang servers, between barriers. With
`sharding="fsdp2"` the model is sharded over the ranks instead (`agents.train.fsdp`): the same gradient,
every rank writing its shards of each checkpoint and taking part in gathering the weights it pushes.
"""

from __future__ import annotations

import copy
import logging
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import searchgym  # noqa: F401  (registers the env ids)
from agents.learners.batch import LearnerBatch
from agents.learners.registry import SecondModel, SecondModelContext, learner_for_config
from agents.memory import Parking, ask_huge_pages, peak_rss_gb, tune_allocator
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.precision import compute_dtype, dtype_name, frozen_copy
from agents.rollout import RolloutEngine
from agents.train import setup, trainer_state
from agents.train.config import TrainConfig
from agents.train.distributed import (all_reduce_sum, broadcast_weights, data_parallel_step, gather_objects, make_accelerator, merge_metrics,
                                      shard, sum_gradients, world_size)
from agents.train.evaluate import Evaluation, evaluate_policy
from agents.train.fsdp import ShardedModel
from agents.train.metrics import MetricsLog, global_stats, signal_summary, step_rollout_metrics
from agents.train.sft import cold_start, sft_step
from agents.train.sync import WeightSync
from agents.train.update import UpdateStats, loss_rows, policy_gradient_step
from searchgym.errors import ConfigError
from searchgym.threads import set_threads

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, config: TrainConfig):
        self.config = config
        self.out = Path(config.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        setup.check_device(config.device)
        set_threads(config.threads)
        if config.huge_pages:
            ask_huge_pages()
        tune_allocator(config.malloc_mmap_threshold or None)
        if not config.distributed and world_size() > 1:
            raise ConfigError(f"started as one of {world_size()} processes (accelerate launch or torchrun) without "
                              "distributed=True: every process would run the whole job into the same out_dir; pass --distributed")
        self.accelerator = make_accelerator(config.device) if config.distributed else None
        """The data-parallel `Accelerator` (None in a plain single-process run)."""
        self.rank = self.accelerator.process_index if self.accelerator else 0
        self.world = self.accelerator.num_processes if self.accelerator else 1
        setup.check_processes(config, self.world)
        device = str(self.accelerator.device) if self.accelerator else config.device
        self.compute_dtype = compute_dtype(config.dtype, device)
        """The precision of every forward pass of the trained models (`TrainConfig.dtype` resolved here)."""
        setup.seed_everything(config.seed)
        self.learner = learner_for_config(config.learner)
        """The registered learner (`LearnerSpec`): its batch function, env needs and second model."""
        self.learner_config = config.learner
        self._build_models(device)
        # Served rollouts never sample here: no bfloat16 copy of the weights for them (the servers run their own dtype).
        self.policy = HFPolicy(self.model, self.tokenizer, config=HFPolicyConfig(
            model=config.model, seed=config.seed, reuse_kv=config.rollout.reuse_kv, max_batch_rows=config.rollout.max_batch_rows,
            dtype=dtype_name(self.compute_dtype) if config.rollout.backend == "hf" else "float32"))
        self.rollout_policy = setup.rollout_policy(config, self.policy, self.tokenizer, self.rank)
        """What samples rollouts and evaluations: `self.policy` (hf), a FanOutPolicy over SGLang clients, or a RouterPolicy."""
        self.models: dict[str, torch.nn.Module] = {"policy": self.model}
        if self.reference is not None and config.optim.cold_start_steps > 0:
            # The reference is the cold-started policy, which a resumed run cannot remake: it is checkpointed.
            self.models["reference"] = self.reference
        self.optimizers = {"policy": self._optimizer(self.sharded.root if self.sharded else self.model)}
        self.wrapped = self.model
        """`self.model` as `accelerator.prepare` returned it (DDP across processes, which broadcasts rank 0's
        weights when it wraps). Forward passes, rollouts, checkpoints and weight pushes use `self.model`: the
        loss reads the decoder and the output embedding separately, which a DDP wrapper does not expose, and
        backward runs under `no_sync` with one explicit gradient sum (`agents.train.distributed`)."""
        if self.accelerator is not None and self.sharded is None:
            self.wrapped, optimizer, scheduler = self.accelerator.prepare(self.model, *self.optimizers["policy"])
            self.optimizers["policy"] = (optimizer, scheduler)
        self.second_model: SecondModel | None = self._make_second_model()
        """The learner's second trained model (COSEARCH's ranker), or None."""
        if self.second_model is not None:
            self.models.update(self.second_model.models)
            self.optimizers.update(self.second_model.optimizers)

        self.parking = self._make_parking()
        """Where idle tensors wait (`OptimConfig.park_idle`), or None."""

        # Rank 0 first: building the env can write caches under out_dir that the other ranks then read.
        with self.accelerator.main_process_first() if self.accelerator else nullcontext():
            self.env = self._make_env("train")
        self.num_questions = len(self.env.unwrapped.records)
        rollout = replace(config.rollout, seed=config.seed,
                          gather_env_calls=config.rollout.gather_env_calls or (self.second_model is not None and self.second_model.gathers_env_calls))
        self.engine = RolloutEngine(self.rollout_policy, lambda: self._make_env("train"), rollout)
        self.sync_weights = WeightSync(config, self.model, self.tokenizer, self.rollout_policy, self.out, self.accelerator, self.is_main,
                                       sharded=self.sharded)
        """Call to push the trained weights to every rollout server (0 s with the in-process backend)."""
        self.metrics_log = MetricsLog(self.out, config.tensorboard)
        self.step = 0
        self.position = 0
        if config.resume and (found := trainer_state.load_newest(self)):
            trainer_state.restore(self, *found)
        if config.resume and self.is_main:
            self.metrics_log.drop_after(self.step)
        try:
            # The servers may serve the released model, another run's weights or an older checkpoint.
            self.sync_weights()
        except BaseException:
            self.close()
            raise

    def _build_models(self, device: str) -> None:
        """The trained policy (LoRA, activation checkpointing, FSDP2 shards as configured) and its KL reference."""
        config = self.config
        self.model, self.tokenizer = setup.load_model(config.model, config.seed, device)
        if config.optim.lora:
            self.model = setup.with_lora(self.model, config.optim.lora_rank)
        self.model.train()
        if config.optim.gradient_checkpointing:
            setup.enable_activation_checkpointing(self.model)
        self.reference = frozen_copy(self.model, self.compute_dtype) if self.learner_config.kl_coef > 0 else None
        """The KL's frozen reference: the policy RL starts from (after the cold start, when the run has one)."""
        self.sharded: ShardedModel | None = None
        """The FSDP2-sharded policy (`sharding="fsdp2"`): what the update, the optimizer and the checkpoints use.
        `self.model` is then a whole replica that samples the in-process rollouts, refreshed from the shards by
        every weight sync (with SGLang rollouts there is no replica: `self.model` is the sharded LM)."""
        if config.sharding == "fsdp2":
            lm = self.model
            if config.rollout.backend == "hf":
                self.model = copy.deepcopy(lm).requires_grad_(False)
            self.sharded = ShardedModel(lm, torch.device(device), cpu_offload=config.cpu_offload, autocast=self.compute_dtype)

    def _make_parking(self) -> Parking | None:
        """Groups of tensors each phase of a step does or does not read (`OptimConfig.park_idle`). The references
        are written once, when first parked: by then they no longer change (a resumed run restored them before,
        the policy's cold start made the policy's before the second model's cold start parks it, the second
        model's is made by its cold start, before the first RL step parks it)."""
        if not self.config.optim.park_idle:
            return None
        groups = {"policy": ([self.model], []), "policy/optimizer": ([], [self.optimizers["policy"][0]]),
                  "policy/reference": ([self.reference], [])}
        if self.second_model is not None:
            modules, optimizers, references = self.second_model.parts()
            groups.update({"second": (modules, []), "second/optimizer": ([], optimizers), "second/reference": (references, [])})
        return Parking(self.out / "parked", groups, frozen=("policy/reference", "second/reference"))

    def _keep(self, *names: str) -> None:
        """With `park_idle`: make the named groups of tensors resident (those of a second model only when there is
        one) and let the others wait in files."""
        if self.parking is not None:
            self.parking.keep(*(n for n in names if n in self.parking.groups))

    SAMPLING = ("policy", "second")
    """What rollouts and evaluations read: the models' weights."""

    def _make_second_model(self) -> SecondModel | None:
        config = self.config
        return self.learner.make_second_model(SecondModelContext(
            learner_config=self.learner_config, policy_model=config.model, seed=config.seed, device=config.device,
            micro_batch=config.optim.micro_batch, max_grad_norm=config.optim.max_grad_norm,
            load_model=self._load_second_model, optimizer=self._optimizer, dtype=dtype_name(self.compute_dtype),
            policy_gradient_step=partial(policy_gradient_step, dtype=self.compute_dtype) if self.accelerator is None
            else partial(data_parallel_step, self.accelerator, dtype=self.compute_dtype),
            supervised_step=partial(sft_step, dtype=self.compute_dtype), rank=self.rank,
            gather_objects=None if self.accelerator is None else gather_objects,
            synchronize=None if self.accelerator is None else partial(broadcast_weights, self.world)))

    def _optimizer(self, model: torch.nn.Module):
        return setup.make_optimizer(model, self.config.optim.lr, self.config.optim.warmup_steps, self.config.optim.adamw)

    def _load_second_model(self, name: str, seed: int):
        """A second model (COSEARCH's ranker) on the run's device, recomputing its activations in backward
        like the policy when `optim.gradient_checkpointing` is set."""
        model, tokenizer = setup.load_model(name, seed, self.config.device)
        if self.config.optim.gradient_checkpointing:
            setup.enable_activation_checkpointing(model)
        return model, tokenizer

    @property
    def is_main(self) -> bool:
        """Whether this process writes metrics and checkpoints and pushes weights (rank 0, or no distribution)."""
        return self.rank == 0

    def _make_env(self, split: str) -> gym.Env:
        kwargs = setup.env_kwargs(self.config, split, self.out / "cache")
        for key, value in self.learner_env_options().items():
            kwargs.setdefault(key, value)  # the run's own env options win over the learner's
        return gym.make(self.config.env.id, **kwargs)

    def learner_env_options(self) -> dict[str, Any]:
        """The env options the learner asks for (its judge, its entity matching, its second model's ranker),
        for evaluating on envs the trainer does not build itself; the run's `env_options` win over them."""
        needs = self.learner.needs
        options = needs.options(self.learner_config)
        if needs.judge and self.config.env.judge is not None:
            options["judge"] = self.config.env.judge
        if self.second_model is not None:
            options.update(self.second_model.env_options())
        return options

    # -- the loop -----------------------------------------------------------------------------------------

    def questions(self, count: int) -> list[int]:
        """The next `count` training questions: a fresh seeded permutation each epoch, so the order depends
        only on (seed, position) and a resumed run draws what the original would have."""
        out = []
        for pos in range(self.position, self.position + count):
            epoch, offset = divmod(pos, self.num_questions)
            order = np.random.default_rng([self.config.seed, epoch]).permutation(self.num_questions)
            out.append(int(order[offset]))
        self.position += count
        return out

    def train_step(self) -> dict[str, float]:
        c = self.config
        start = time.perf_counter()
        for optimizer, _ in self.optimizers.values():
            optimizer.zero_grad(set_to_none=True)  # the last step's gradients (a second model's too) are spent
        if self.second_model is not None:
            self.second_model.begin_step()
        park_s = self.parking.seconds if self.parking is not None else 0.0
        self._keep(*self.SAMPLING)  # after a checkpoint or a cold start: the optimizers' states and references wait
        indices = self.questions(c.questions_per_step)
        trajectories = self.rollout_share(shard(indices, self.rank, self.world), self.step, self.rank)
        rollout_s = time.perf_counter() - start
        targets = self.learner.batch(trajectories, self.learner_config)
        # Kept KV rows and bfloat16 copies of the weights are stale after the update: room for its activations.
        self.policy.release_memory()
        if self.second_model is not None:
            self.second_model.release_memory()
        self._keep("policy", "policy/optimizer", "policy/reference")
        update_start = time.perf_counter()
        stats, grad_norm = self.update(trajectories, targets)
        update_s = time.perf_counter() - update_start
        scheduler = self.optimizers["policy"][1]
        self.policy.mark_updated()
        sync_s = self.sync_weights()
        metrics = step_rollout_metrics(trajectories, targets)
        metrics.update({
            "loss/policy": stats.loss, "loss/clip_frac_high": stats.clip_frac_high, "loss/clip_frac_low": stats.clip_frac_low,
            "loss/ratio_mean": stats.ratio_mean, "loss/tokens": stats.loss_tokens, "loss/grad_norm": float(grad_norm),
            "optim/lr": scheduler.get_last_lr()[0], "time/rollout_s": rollout_s, "time/update_s": update_s,
        })
        metrics.update(self.engine.timing.metrics())
        if stats.kl is not None:
            metrics["loss/kl"] = stats.kl
        if c.rollout.backend != "hf":
            metrics["time/sync_s"] = sync_s
        metrics.update(targets.metrics)
        if self.second_model is not None:
            self.optimizers["policy"][0].zero_grad(set_to_none=True)  # not held through the second model's update
            second_start = time.perf_counter()
            self._keep("second", "second/optimizer", "second/reference")
            metrics.update(self.second_model.train_step(trajectories, self.env))
            for optimizer, _ in self.second_model.optimizers.values():
                optimizer.zero_grad(set_to_none=True)  # stepped: not held through the next rollouts or an evaluation
            metrics["time/second_model_s"] = time.perf_counter() - second_start
        self._keep(*self.SAMPLING)
        if self.parking is not None:
            metrics["time/park_s"] = self.parking.seconds - park_s
            metrics["perf/parked_gb"] = self.parking.parked_gb()
        self.step += 1
        metrics["time/step_s"] = time.perf_counter() - start
        # What is left: scoring, advantages, weight pushes, a second model's update, bookkeeping.
        metrics["time/other_s"] = max(0.0, metrics["time/step_s"] - metrics["time/generate_s"] - metrics["time/env_s"] - update_s)
        metrics["perf/peak_rss_gb"] = peak_rss_gb()
        if self.accelerator is not None:
            done = {k: v for k, v in metrics.items() if k.startswith("loss/") or k == "optim/lr"}  # already over every rank
            metrics = {**merge_metrics(self.accelerator, metrics), **done}
        metrics["step"] = self.step
        self._log(metrics)
        if c.checkpoint_every and self.step % c.checkpoint_every == 0:
            self.save()
        return metrics

    def rollout_share(self, indices: list[int], step: int, rank: int = 0) -> list:
        """Roll out questions `indices` with the sampling seeded by (seed, step, rank), so that resuming
        reproduces a step and a rank's samples do not depend on how many ranks there are."""
        self.engine.reseed(self.config.seed * 1_000_003 + step + rank * 1_000_000_007)
        return self.engine.rollout([{"options": {"index": i}} for i in indices])

    def update(self, trajectories: list, targets: LearnerBatch) -> tuple[UpdateStats, torch.Tensor]:
        """One optimizer step of the policy on this rank's trajectories; returns the step's stats (over every
        rank) and the gradient norm before clipping. Distributed, the loss denominator is the whole step's
        and the ranks' gradients are summed, so the step equals a single process's over all trajectories."""
        c, lc = self.config, self.learner_config
        optimizer, scheduler = self.optimizers["policy"]
        optimizer.zero_grad(set_to_none=True)
        # The loss's settings come from the learner's config, as for its second model; the policy's generation
        # budget is the norm length of seq-mean-token-sum-norm (Dr.GRPO).
        settings = lc.loss_settings(c.rollout.max_response_tokens)
        kwargs = {"pad_id": self.tokenizer.pad_token_id, "micro_batch": c.optim.micro_batch, "reference": self.reference,
                  "temperature": c.rollout.temperature, "dtype": self.compute_dtype}
        params = [p for p in self.model.parameters() if p.requires_grad]
        acc = self.accelerator
        if acc is None:
            stats = policy_gradient_step(self.model, trajectories, targets, settings, **kwargs)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, c.optim.max_grad_norm)
        else:
            rows, tokens = loss_rows(trajectories, targets)
            total_tokens, total_rows = all_reduce_sum(acc, [tokens, len(rows)])
            denominator = settings.denominator(total_tokens, total_rows)
            if self.sharded is not None:
                # FSDP2 sums the ranks' gradients after each pass; ranks with fewer micro-batches pad (agents.train.fsdp).
                root = self.sharded.root
                local, grad_norm = self.sharded.accumulate(
                    len(rows), c.optim.micro_batch, self.tokenizer.pad_token_id, c.optim.max_grad_norm,
                    lambda: policy_gradient_step(root, trajectories, targets, settings, denominator=denominator, logprobs=root, **kwargs))
            else:
                with acc.no_sync(self.wrapped):
                    local = policy_gradient_step(self.model, trajectories, targets, settings, denominator=denominator, backward=acc.backward,
                                                 **kwargs)
                sum_gradients(acc, params)
                grad_norm = acc.clip_grad_norm_(params, c.optim.max_grad_norm)
            stats = global_stats(acc, local, total_tokens)
        optimizer.step()
        scheduler.step()
        return stats, grad_norm

    def cold_start(self) -> list[float]:
        """`cold_start_steps` supervised steps on oracle trajectories (synthetic world only), then the second
        model's own cold start when it has one; both go into one step-0 metrics line. Returns the policy's
        losses."""
        losses = cold_start(self)
        line: dict[str, float] = {}
        if losses:
            self.policy.mark_updated()
            self.sync_weights()
            if self.reference is not None:
                # KL to the policy RL starts from, not to the model as released (which the cold start left).
                if self.sharded is not None:
                    self.sharded.copy_into(self.reference)  # a collective: every rank holds a whole reference
                else:
                    self.reference.load_state_dict(self.model.state_dict())
            line.update({"cold_start/loss_first": losses[0], "cold_start/loss_last": losses[-1]})
        if self.second_model is not None:
            self._keep("second", "second/reference")
            line.update(self.second_model.cold_start(self.env))
            self._keep(*self.SAMPLING)
        if line:
            self._log({"step": 0, **line})
        return losses

    def evaluate(self, count: int | None = None) -> dict[str, float]:
        """Greedy EM/F1 on the first `count` questions of the run's evaluation split (`setup.eval_split`: the
        synthetic world's test or validation split; a question file's held-out or training questions)."""
        return self.evaluation(count).metrics

    def evaluating(self) -> AbstractContextManager:
        """The context any evaluation of the policy runs in: its second model's (`SecondModel.evaluating`:
        COSEARCH's ranker decodes greedily), or none."""
        return self.second_model.evaluating() if self.second_model is not None else nullcontext()

    def evaluation(self, count: int | None = None, samples: int = 0) -> Evaluation:
        """`evaluate`, plus each question's greedy EM and, with `samples` = k >= 2, Avg@k (seeded by the run's seed)."""
        split = setup.eval_split(self.config)
        self._keep(*self.SAMPLING)
        with self.evaluating():
            return evaluate_policy(self.rollout_policy, lambda: self._make_env(split), self.engine.config, count or self.config.eval_questions,
                                   samples=samples, temperature=self.config.rollout.temperature, seed=self.config.seed)

    def run(self, progress: bool = False) -> list[dict[str, float]]:
        """Cold starts (when configured and not resumed: the policy's, then the second model's), then RL steps
        up to `config.steps`."""
        if self.step == 0:
            self.cold_start()
        history = []
        steps = range(self.step, self.config.steps)
        progress = progress and self.is_main
        if progress:
            from tqdm import tqdm

            steps = tqdm(steps, desc=self.learner.name, initial=self.step, total=self.config.steps)
        for _ in steps:
            history.append(self.train_step())
            if progress:
                m = history[-1]
                steps.set_postfix(reward=f"{m['rollout/reward']:.2f}", em=f"{m['rollout/em']:.2f}", gen=f"{m['time/generate_s']:.0f}s",
                                  upd=f"{m['time/update_s']:.0f}s", tok_s=f"{m['perf/sampled_tok_s']:.0f}", rss=f"{m['perf/peak_rss_gb']:.1f}G",
                                  **signal_summary(m))
        if self.config.checkpoint_every == 0:
            self.save()
        return history

    # -- state ----------------------------------------------------------------------------------------------

    def save(self) -> Path | None:
        """Write a checkpoint (rank 0 only: the ranks hold the same weights; others return None). Sharded, every
        rank writes its shards (`agents.train.sharded_checkpoint`) and rank 0 the rest. With `park_idle`, what
        waits in files is read back one model or optimizer at a time, for its own write."""
        return trainer_state.save(self)

    def _log(self, metrics: dict[str, float]) -> None:
        if self.is_main:
            self.metrics_log.write(metrics, self.step)

    def close(self) -> None:
        """Stop the rollout engine and servers' clients, and close the logs. With `park_idle`, what waits in files
        (optimizer states, references) is dropped with the files; the models' weights stay."""
        if self.parking is not None:
            self.parking.close()
        self.engine.close()
        if self.rollout_policy is not self.policy:
            self.rollout_policy.close()
        self.metrics_log.close()
        if self.accelerator is not None:
            self.accelerator.end_training()
