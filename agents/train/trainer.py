"""The training loop: sample questions, roll out, score, compute advantages, update, sync.

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
alone writes metrics and checkpoints and pushes weights to the SGLang servers, between barriers.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
import math
import os
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import searchgym  # noqa: F401  (registers the env ids)
from agents.learners import cosearch, cw_grpo, e_grpo, grpo
from agents.learners.batch import LearnerBatch
from agents.models import TinyModelConfig, build_tiny_model, load_model_and_tokenizer, save_model
from agents.policies.hf import HFPolicy, HFPolicyConfig
from agents.rollout import RolloutConfig, RolloutEngine, rollout_metrics
from agents.train.checkpoint import load_newest_valid, save_checkpoint
from agents.train.tb import log_tensorboard
from agents.train.config import TrainConfig
from agents.train.distributed import all_reduce_sum, make_accelerator, merge_metrics, shard, sum_gradients
from agents.train.ranker import PolicyChatBackend
from agents.train.sft import oracle_example, sft_step
from agents.train.update import UpdateStats, loss_rows, policy_gradient_step
from searchgym.errors import BackendError, ConfigError

logger = logging.getLogger(__name__)

Targets = Callable[[list, Any], LearnerBatch]


def _learner(config: TrainConfig) -> tuple[Any, Targets]:
    common = {"eps_low": config.eps_low, "eps_high": config.eps_high, "aggregation": config.aggregation,
              "kl_coef": config.kl_coef, "dynamic_sampling": config.dynamic_sampling}
    if config.learner == "grpo":
        return grpo.GRPOConfig(**common), grpo.batch_advantages
    if config.learner == "cw-grpo":
        return cw_grpo.CWGRPOConfig(**common, alpha=math.inf if config.alpha is None else config.alpha), cw_grpo.batch_advantages
    if config.learner == "e-grpo":
        return e_grpo.EGRPOConfig(**common, alpha=0.3 if config.alpha is None else config.alpha), e_grpo.batch_advantages
    return cosearch.CoSearchConfig(**common, format_penalty=0.2 if config.alpha is None else config.alpha), grpo.batch_advantages


def _load_model(name: str, seed: int, device: str = "cpu"):
    if name == "tiny":
        torch.manual_seed(seed)
        model, tokenizer = build_tiny_model(TinyModelConfig())
        return model.to(device), tokenizer
    return load_model_and_tokenizer(name, dtype="float32", device=device)


def _check_device(device: str) -> None:
    try:
        kind = torch.device(device).type
    except RuntimeError as e:
        raise ConfigError(f"device must be cpu, cuda or cuda:N, got {device!r}") from e
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but torch sees no CUDA device here; use device='cpu'")


class Trainer:
    def __init__(self, config: TrainConfig):
        self.config = config
        self.out = Path(config.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        _check_device(config.device)
        if not config.distributed and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ConfigError(f"started as one of {os.environ['WORLD_SIZE']} processes (accelerate launch or torchrun) without "
                              "distributed=True: every process would run the whole job into the same out_dir; pass --distributed")
        self.accelerator = make_accelerator(config.device) if config.distributed else None
        """The data-parallel `Accelerator` (None in a plain single-process run)."""
        self.rank = self.accelerator.process_index if self.accelerator else 0
        self.world = self.accelerator.num_processes if self.accelerator else 1
        if config.questions_per_step % self.world:
            raise ConfigError(f"questions_per_step={config.questions_per_step} must be divisible by the {self.world} processes: "
                              "each rolls out whole questions (GRPO groups)")
        if config.cold_start_steps > 0 and config.cold_start_batch % self.world:
            raise ConfigError(f"cold_start_batch={config.cold_start_batch} must be divisible by the {self.world} processes")
        device = str(self.accelerator.device) if self.accelerator else config.device
        _seed_everything(config.seed)
        self.learner_config, self.targets = _learner(config)
        self.model, self.tokenizer = _load_model(config.model, config.seed, device)
        if config.lora:
            self.model = _with_lora(self.model, config.lora_rank)
        self.model.train()
        self.policy = HFPolicy(self.model, self.tokenizer, config=HFPolicyConfig(model=config.model, seed=config.seed))
        self.rollout_policy = self._rollout_policy()
        """What samples rollouts and evaluations: `self.policy` (hf), or a FanOutPolicy over SGLang clients."""
        self.reference = copy.deepcopy(self.model).eval() if config.kl_coef > 0 else None
        self.models: dict[str, torch.nn.Module] = {"policy": self.model}
        self.optimizers = {"policy": self._optimizer(self.model, config.lr)}
        self.wrapped = self.model
        """`self.model` as `accelerator.prepare` returned it (DDP across processes, which broadcasts rank 0's
        weights when it wraps). Forward passes, rollouts, checkpoints and weight pushes use `self.model`: the
        loss reads the decoder and the output embedding separately, which a DDP wrapper does not expose, and
        backward runs under `no_sync` with one explicit gradient sum (`agents.train.distributed`)."""
        if self.accelerator is not None:
            self.wrapped, optimizer, scheduler = self.accelerator.prepare(self.model, *self.optimizers["policy"])
            self.optimizers["policy"] = (optimizer, scheduler)

        self.ranker_backend = None
        if config.learner == "cosearch":
            ranker_model, ranker_tok = _load_model(config.ranker_model or config.model, config.seed + 1, config.device)
            ranker_model.train()
            self.ranker_policy = HFPolicy(ranker_model, ranker_tok, config=HFPolicyConfig(seed=config.seed + 1))
            self.ranker_backend = PolicyChatBackend(self.ranker_policy, seed=config.seed)
            self.models["ranker"] = ranker_model
            self.optimizers["ranker"] = self._optimizer(ranker_model, config.lr)

        # Rank 0 first: building the env can write caches under out_dir that the other ranks then read.
        with self.accelerator.main_process_first() if self.accelerator else nullcontext():
            self.env = self._make_env("train")
        self.num_questions = len(self.env.unwrapped.records)
        rollout = RolloutConfig(group_size=config.group_size, temperature=config.temperature,
                                max_turn_tokens=config.max_turn_tokens, max_response_tokens=config.max_response_tokens, seed=config.seed)
        self.engine = RolloutEngine(self.rollout_policy, lambda: self._make_env("train"), rollout)
        self.step = 0
        self.position = 0
        self._tb = None
        if config.resume and (found := load_newest_valid(self.out / "checkpoints", self.models, self.optimizers)):
            self._restore(*found)
        if config.resume and self.is_main:
            self._drop_unsaved_metrics()
        try:
            # The servers may serve the released model, another run's weights or an older checkpoint.
            self.sync_weights()
        except BaseException:
            self.close()
            raise

    # -- set-up -----------------------------------------------------------------------------------------

    def _optimizer(self, model: torch.nn.Module, lr: float):
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        warmup = max(self.config.warmup_steps, 1)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
        return optimizer, scheduler

    def _rollout_policy(self):
        c = self.config
        if c.rollout_backend == "hf":
            return self.policy
        if c.weight_sync == "tensors" and importlib.util.find_spec("sglang") is None:
            raise ConfigError("weight_sync='tensors' needs the sglang package importable in the trainer's process "
                              "(pip install 'searchgym[sglang]'); use weight_sync='disk' otherwise")
        from agents.policies.fanout import FanOutPolicy
        from agents.policies.http import HTTPConfig
        from agents.policies.sglang import SGLangPolicy, SGLangPolicyConfig

        http = HTTPConfig(timeout_s=c.sglang_timeout_s)
        fan = FanOutPolicy([SGLangPolicy(SGLangPolicyConfig(url=url, http=http), tokenizer=self.tokenizer) for url in c.sglang_urls])
        fan.assign(self.rank)  # ranks start their round robin on different servers
        down = [m.config.url for m in fan.members if not m.health(timeout_s=min(10.0, c.sglang_timeout_s))]
        if down:
            fan.close()
            raise BackendError(f"no SGLang server answers /health at {', '.join(down)}; start them first "
                               "(python -m sglang.launch_server, see docs/learners.md) or fix sglang_urls")
        return fan

    def sync_weights(self) -> float:
        """Push the trained weights to every rollout server and check that each reports the new weight
        version. Returns the seconds it took (0 with the in-process backend, which shares the model)."""
        c = self.config
        if c.rollout_backend == "hf":
            return 0.0
        start = time.perf_counter()
        if self.accelerator is not None:
            # Rank 0 pushes for everyone: after every rank has finished its update, before any samples again.
            self.accelerator.wait_for_everyone()
            if not self.is_main:
                self.accelerator.wait_for_everyone()
                return time.perf_counter() - start
        if c.weight_sync == "disk":
            # Absolute: the servers resolve the path from their own working directory.
            folder = save_model(self.model, self.tokenizer, (self.out / "rollout-weights").resolve())
            self.rollout_policy.load_weights(folder)
        else:
            self.rollout_policy.update_weights(self.model.state_dict().items())
        for member in self.rollout_policy.members:
            reported = member.model_info().get("weight_version")
            if reported != str(member.weight_version):
                raise BackendError(f"the SGLang server at {member.config.url} reports weight version {reported!r} after the "
                                   f"update, expected {str(member.weight_version)!r}: did another process update or restart it?")
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()
        return time.perf_counter() - start

    @property
    def is_main(self) -> bool:
        """Whether this process writes metrics and checkpoints and pushes weights (rank 0, or no distribution)."""
        return self.rank == 0

    def _make_env(self, split: str) -> gym.Env:
        c = self.config
        kwargs: dict[str, Any] = dict(max_turns=c.max_turns, top_k=c.top_k, cache_dir=self.out / "cache", **c.env_options)
        if c.env_id == "SearchQA-Synthetic-v0":
            kwargs.update(num_entities=c.num_entities, hops=c.hops, split=split, seed=c.seed,
                          num_questions=c.num_questions if split == "train" else max(c.eval_questions, 1))
        else:
            kwargs.update(data_path=c.data_path, corpus_path=c.corpus_path)
        if c.learner == "cw-grpo":
            kwargs.setdefault("judge", "gold")
        for key, value in self.ranker_env_options().items():
            kwargs.setdefault(key, value)
        return gym.make(c.env_id, **kwargs)

    def ranker_env_options(self) -> dict[str, Any]:
        """COSEARCH: the env options that put the trained ranker behind search (none for other learners);
        for evaluating on envs the trainer does not build itself."""
        if self.ranker_backend is None:
            return {}
        from searchgym.rankers.llm import LLMRanker, LLMRankerConfig

        return {"ranker": LLMRanker(self.ranker_backend, LLMRankerConfig(max_doc_chars=160, max_tokens=48, temperature=1.0)), "candidates": 5}

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
        if self.ranker_backend is not None:
            self.ranker_backend.clear()
        indices = self.questions(c.questions_per_step)
        trajectories = self.rollout_share(shard(indices, self.rank, self.world), self.step, self.rank)
        rollout_s = time.perf_counter() - start
        targets = self.targets(trajectories, self.learner_config)
        stats, grad_norm = self.update(trajectories, targets)
        scheduler = self.optimizers["policy"][1]
        self.policy.mark_updated()
        sync_s = self.sync_weights()
        metrics = _rollout_metrics(trajectories, targets)
        metrics.update({
            "loss/policy": stats.loss, "loss/clip_frac_high": stats.clip_frac_high, "loss/clip_frac_low": stats.clip_frac_low,
            "loss/ratio_mean": stats.ratio_mean, "loss/tokens": stats.loss_tokens, "loss/grad_norm": float(grad_norm),
            "optim/lr": scheduler.get_last_lr()[0], "time/rollout_s": rollout_s,
        })
        if stats.kl is not None:
            metrics["loss/kl"] = stats.kl
        if c.rollout_backend != "hf":
            metrics["time/sync_s"] = sync_s
        metrics.update(targets.metrics)
        if self.ranker_backend is not None:
            metrics.update(self._ranker_step(trajectories))
        self.step += 1
        metrics["time/step_s"] = time.perf_counter() - start
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
        c = self.config
        optimizer, scheduler = self.optimizers["policy"]
        optimizer.zero_grad(set_to_none=True)
        kwargs = {"pad_id": self.tokenizer.pad_token_id, "micro_batch": c.micro_batch, "eps_low": c.eps_low, "eps_high": c.eps_high,
                  "aggregation": c.aggregation, "kl_coef": c.kl_coef, "reference": self.reference, "norm_length": c.max_response_tokens,
                  "temperature": c.temperature}
        params = [p for p in self.model.parameters() if p.requires_grad]
        acc = self.accelerator
        if acc is None:
            stats = policy_gradient_step(self.model, trajectories, targets, **kwargs)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, c.max_grad_norm)
        else:
            rows, tokens = loss_rows(trajectories, targets)
            total_tokens, total_rows = all_reduce_sum(acc, [tokens, len(rows)])
            denominator = total_tokens if c.aggregation == "token-mean" else total_rows
            with acc.no_sync(self.wrapped):
                local = policy_gradient_step(self.model, trajectories, targets, denominator=denominator, backward=acc.backward, **kwargs)
            sum_gradients(acc, params)
            stats = _global_stats(acc, local, total_tokens)
            grad_norm = acc.clip_grad_norm_(params, c.max_grad_norm)
        optimizer.step()
        scheduler.step()
        return stats, grad_norm

    def _ranker_step(self, trajectories) -> dict[str, float]:
        """COSEARCH: score, cluster and GRPO-update the ranker on this step's ranker calls."""
        calls, golds, r_main, gens = [], [], [], []
        env_corpus = self.env.unwrapped.corpus
        texts = (lambda doc_id: env_corpus.get(doc_id).text) if env_corpus is not None else None
        for i, t in enumerate(trajectories):
            f1 = grpo.outcome_reward(t.step_infos, "f1") if t.step_infos else 0.0
            for call, info in zip(cosearch.calls_from_trajectory(t.step_infos, texts=texts, trajectory=i), [s for s in t.step_infos if s.get("ranker")]):
                gen = self.ranker_backend.take(info["ranker"]["messages"], info["ranker"]["raw_output"] or "")
                if gen is None:
                    continue  # a backend failure: nothing was sampled, nothing to train on
                calls.append(call)
                golds.append(t.gold_answers or [])
                r_main.append(f1)
                gens.append(gen)
        if not calls:
            return {"ranker/calls": 0.0}
        batch = cosearch.rank_batch(calls, golds, r_main, self.learner_config)
        targets = LearnerBatch(
            advantages=[torch.full((len(g.token_ids),), batch.advantages.get(i, 0.0)) for i, g in enumerate(gens)],
            include=[i in batch.advantages for i in range(len(gens))],
            rewards=[s.reward for s in batch.scores],
        )
        model = self.models["ranker"]
        optimizer, scheduler = self.optimizers["ranker"]
        optimizer.zero_grad(set_to_none=True)
        stats = policy_gradient_step(model, gens, targets, pad_id=self.ranker_policy.tokenizer.pad_token_id, micro_batch=self.config.micro_batch,
                                     eps_low=self.config.eps_low, eps_high=self.config.eps_high, aggregation=self.config.aggregation,
                                     temperature=self.ranker_backend.temperature)
        if stats.loss_tokens:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], self.config.max_grad_norm)
            optimizer.step()
        scheduler.step()
        self.ranker_policy.mark_updated()
        return {
            "ranker/calls": float(len(calls)), "ranker/groups": float(len(batch.groups)),
            "ranker/reward": float(np.mean(targets.rewards)), "ranker/valid_rate": float(np.mean([c.valid for c in calls])),
            "ranker/loss": stats.loss,
        }

    def cold_start(self) -> list[float]:
        """`cold_start_steps` supervised steps on oracle trajectories (synthetic world only)."""
        c = self.config
        if c.cold_start_steps <= 0:
            return []
        if not hasattr(self.env.unwrapped, "world"):
            raise ValueError("cold start needs the synthetic world's oracle trajectories (env_id SearchQA-Synthetic-v0)")
        optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=c.cold_start_lr, weight_decay=0.0)
        rng = np.random.default_rng([c.seed, 7])
        losses = []
        params = [p for p in self.model.parameters() if p.requires_grad]
        acc = self.accelerator
        for _ in range(c.cold_start_steps):
            chosen = [int(i) for i in rng.choice(self.num_questions, c.cold_start_batch, replace=False)]
            optimizer.zero_grad(set_to_none=True)
            if acc is None:
                batch = [oracle_example(self.env, self.tokenizer, i) for i in chosen]
                losses.append(sft_step(self.model, batch, pad_id=self.tokenizer.pad_token_id, micro_batch=c.micro_batch))
                torch.nn.utils.clip_grad_norm_(params, c.max_grad_norm)
            else:
                batch = [oracle_example(self.env, self.tokenizer, i) for i in shard(chosen, self.rank, self.world)]
                (total,) = all_reduce_sum(acc, [sum(sum(e.loss_mask) for e in batch)])
                with acc.no_sync(self.wrapped):
                    local = sft_step(self.model, batch, pad_id=self.tokenizer.pad_token_id, micro_batch=c.micro_batch,
                                     total=int(total), backward=acc.backward)
                sum_gradients(acc, params)
                losses.append(all_reduce_sum(acc, [local])[0])
                acc.clip_grad_norm_(params, c.max_grad_norm)
            optimizer.step()
        self.policy.mark_updated()
        self.sync_weights()
        self._log({"step": 0, "cold_start/loss_first": losses[0], "cold_start/loss_last": losses[-1]})
        return losses

    def evaluate(self, count: int | None = None) -> dict[str, float]:
        """Greedy EM/F1 on the first `count` test-split questions (synthetic world) or training questions."""
        count = count or self.config.eval_questions
        make = (lambda: self._make_env("test")) if self.config.env_id == "SearchQA-Synthetic-v0" else (lambda: self._make_env("train"))
        engine = RolloutEngine(self.rollout_policy, make, replace(self.engine.config, group_size=1, temperature=0.0, seed=None))
        try:
            n = min(count, len(make().unwrapped.records))
            trajectories = engine.rollout([{"options": {"index": i}} for i in range(n)])
        finally:
            engine.close()
        summary = [t.step_infos[-1].get("episode", {}) if t.step_infos else {} for t in trajectories]
        return {
            "eval/em": float(np.mean([s.get("em", 0.0) for s in summary])),
            "eval/f1": float(np.mean([s.get("f1", 0.0) for s in summary])),
            "eval/searches": float(np.mean([s.get("searches", 0) for s in summary])),
            "eval/questions": float(n),
        }

    def run(self, progress: bool = False) -> list[dict[str, float]]:
        """Cold start (when configured and not resumed), then RL steps up to `config.steps`."""
        if self.step == 0 and self.config.cold_start_steps > 0:
            self.cold_start()
        history = []
        steps = range(self.step, self.config.steps)
        progress = progress and self.is_main
        if progress:
            from tqdm import tqdm

            steps = tqdm(steps, desc=f"{self.config.learner}", initial=self.step, total=self.config.steps)
        for _ in steps:
            history.append(self.train_step())
            if progress:
                steps.set_postfix(reward=f"{history[-1]['rollout/reward']:.2f}", em=f"{history[-1]['rollout/em']:.2f}")
        if self.config.checkpoint_every == 0:
            self.save()
        return history

    # -- state ----------------------------------------------------------------------------------------------

    def save(self) -> Path | None:
        """Write a checkpoint (rank 0 only: the ranks hold the same weights; others return None)."""
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()
        if not self.is_main:
            return None
        state = {"position": self.position, "config": _jsonable_config(self.config), "versions": {"policy": self.policy.weight_version}}
        return save_checkpoint(self.out / "checkpoints", self.step, self.models, self.optimizers, state)

    def _restore(self, path: Path, state: dict) -> None:
        self.step = int(path.name.split("-")[1])
        self.position = int(state["position"])
        self.policy.mark_updated()
        logger.info("resumed from %s (step %d)", path, self.step)

    def _drop_unsaved_metrics(self) -> None:
        """Drop metrics lines of steps after the restored checkpoint (logged, then the process died before
        the checkpoint was written) and lines cut short by a crash: the resumed run logs those steps again,
        and each step must have exactly one line."""
        path = self.out / "metrics.jsonl"
        if not path.is_file():
            return
        lines = path.read_text().splitlines()
        kept = []
        for line in lines:
            try:
                step = int(json.loads(line)["step"])
            except (ValueError, KeyError, TypeError):
                continue
            # Step 0 is the cold start, which a run without any checkpoint does again.
            if self.step > 0 and step <= self.step:
                kept.append(line)
        if len(kept) != len(lines):
            logger.info("dropping %d metrics line(s) written after the checkpoint of step %d", len(lines) - len(kept), self.step)
            tmp = path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(line + "\n" for line in kept))
            os.replace(tmp, path)

    def _log(self, metrics: dict[str, float]) -> None:
        if not self.is_main:
            return
        with open(self.out / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
        if self.config.tensorboard:
            log_tensorboard(self, metrics)

    def close(self) -> None:
        self.engine.close()
        if self.rollout_policy is not self.policy:
            self.rollout_policy.close()
        if self._tb is not None:
            self._tb.close()
        if self.accelerator is not None:
            self.accelerator.end_training()


def _rollout_metrics(trajectories, targets: LearnerBatch) -> dict[str, float]:
    """The rollout engine's batch statistics plus what only the env's episode summaries and the learner know."""
    summaries = [t.step_infos[-1].get("episode", {}) if t.step_infos else {} for t in trajectories]
    rates = [s.get("entity_rate") for s in summaries if s.get("entity_rate") is not None]
    return {
        **rollout_metrics(trajectories),
        "rollout/reward": float(np.mean(targets.rewards)),
        "rollout/em": float(np.mean([s.get("em", 0.0) for s in summaries])),
        "rollout/f1": float(np.mean([s.get("f1", 0.0) for s in summaries])),
        "rollout/entity_rate": float(np.mean(rates)) if rates else 0.0,
        "rollout/sampled_tokens": float(sum(t.num_sampled_tokens for t in trajectories)),
        "rollout/included": float(sum(targets.include)),
    }


def _global_stats(accelerator, local: UpdateStats, total_tokens: float) -> UpdateStats:
    """The step's update stats over every rank from one rank's share (see `policy_gradient_step`)."""
    t = local.loss_tokens
    loss, kl, has_kl, high, low, ratio = all_reduce_sum(accelerator, [
        local.loss, local.kl or 0.0, float(local.kl is not None), local.clip_frac_high * t, local.clip_frac_low * t, local.ratio_mean * t])
    if not total_tokens:
        return UpdateStats(0.0, None, 0.0, 0.0, 1.0, 0)
    return UpdateStats(loss=loss, kl=kl if has_kl else None, clip_frac_high=high / total_tokens, clip_frac_low=low / total_tokens,
                       ratio_mean=ratio / total_tokens, loss_tokens=int(total_tokens))


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _with_lora(model, rank: int):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], lora_dropout=0.0))


def _jsonable_config(config: TrainConfig) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(config), default=str))
