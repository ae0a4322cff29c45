"""COSEARCH's second trained model: the ranker, a policy behind the `ChatBackend` the env's `LLMRanker` calls.

`PolicyChatBackend` samples the ranker's replies with an `agents` policy and remembers, for every reply,
the prompt ids, the sampled ids and their logprobs. `RankerTrainer` (the learner's second-model hook, see
`agents.learners.registry.SecondModel`) puts that ranker into the env, and after each step's rollouts matches
the ranker calls recorded in step info (`info["ranker"]`: messages and raw output) to those generations, so
the ranker's GRPO update trains on exactly the tokens that were sampled. Before RL, `RankerTrainer.cold_start`
teaches it the rerank format on the synthetic world's oracle reranks (`agents.learners.ranker_sft`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agents.learners import cosearch
from agents.learners.batch import LearnerBatch, Trajectory
from agents.learners.grpo import outcome_reward
from agents.learners.registry import SecondModel, SecondModelContext
from agents.policies.base import SamplingParams
from agents.precision import compute_dtype, frozen_copy
from searchgym.errors import BackendError, ConfigError, SearchGymError

logger = logging.getLogger(__name__)


def calls_view(calls: Sequence[cosearch.RankerCall], batch: cosearch.RankerBatch, questions: Sequence[Hashable],
               ks: Sequence[int], golds: Sequence[Sequence[str]]) -> dict[str, Any]:
    """One step's ranker calls as `rank_batch` scored them, as JSON values: per call its trajectory (index in the
    step), turn, question, sub-query, whether it parsed and its pool holds an answer (I_ans), Hit@k of the shown
    order, r_rel, r_main, its Eq. 6 reward, and its cluster and GRPO advantage (None for a call in a dropped
    cluster); and the cluster counts."""
    cluster = {i: g for g, members in enumerate(batch.groups) for i in members}
    out = []
    for i, (call, score) in enumerate(zip(calls, batch.scores)):
        hits = cosearch.hits_at(call.order, cosearch.answer_holders(call, golds[i]), ks)
        out.append({"trajectory": call.trajectory, "turn": call.turn, "question": str(questions[i]), "query": call.query,
                    "valid": score.valid, "has_answer": score.has_answer, "hits": hits, "r_rel": score.r_rel, "r_main": score.r_main,
                    "reward": score.reward, "cluster": cluster.get(i), "advantage": batch.advantages.get(i)})
    return {"calls": out, "groups": len(batch.groups), "dropped_small": batch.dropped_small, "dropped_flat": batch.dropped_flat}


@dataclass
class RankerGeneration:
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]


class PolicyChatBackend:
    """A `ChatBackend` that samples with a `Policy` and logs each generation for training."""

    def __init__(self, policy, *, temperature: float = 1.0, max_tokens: int = 96, seed: int | None = None):
        self.policy = policy
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.greedy = False
        """True while the policy is evaluated (`RankerTrainer.evaluating`): replies are decoded greedily and not
        logged (nothing trains on them)."""
        self._calls = 0
        self.log: dict[tuple[str, str], list[RankerGeneration]] = {}
        """(prompt, reply) -> the generations that produced it, oldest first: G samples of one question often
        make the same call and get the same short reply, and each one is a call to train on."""

    def chat(self, conversations: Sequence[Sequence[dict]], *, max_tokens: int = 512, temperature: float = 0.0) -> list[str]:
        tok = self.policy.tokenizer
        prompts = [tok.apply_chat_template(list(c), add_generation_prompt=True, tokenize=False) for c in conversations]
        ids = [tok.encode(p, add_special_tokens=False) for p in prompts]
        self._calls += 1
        params = SamplingParams(n=1, temperature=0.0 if self.greedy else self.temperature, max_new_tokens=min(max_tokens, self.max_tokens), stop=("</rerank>",),
                                seed=None if self.seed is None else self.seed * 7919 + self._calls)
        try:
            outs = self.policy.generate(ids, params)
        except SearchGymError as e:
            raise BackendError(f"ranker policy failed: {e}") from e
        replies = []
        for prompt, prompt_ids, group in zip(prompts, ids, outs):
            c = group[0]
            replies.append(c.text)
            if self.greedy:
                continue
            self.log.setdefault((prompt, c.text), []).append(RankerGeneration(
                prompt_ids + list(c.token_ids), [0] * len(prompt_ids) + [1] * len(c.token_ids), [0.0] * len(prompt_ids) + list(c.logprobs)))
        return replies

    def take(self, messages: Sequence[dict], raw_output: str) -> RankerGeneration | None:
        """The oldest logged generation of one recorded call (removed from the log), or None if unknown."""
        prompt = self.policy.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        generations = self.log.get((prompt, raw_output))
        if not generations:
            return None
        generation = generations.pop(0)
        if not generations:
            del self.log[(prompt, raw_output)]
        return generation

    def clear(self) -> None:
        self.log.clear()

    def describe(self) -> dict[str, Any]:
        return {"kind": "policy", "policy": self.policy.describe(), "temperature": self.temperature}


class RankerTrainer(SecondModel):
    """COSEARCH's ranker as the learner's second model: its own copy of a model, optimizer and sampler."""

    def __init__(self, ctx: SecondModelContext):
        from agents.policies.hf import HFPolicy, HFPolicyConfig

        self.ctx = ctx
        self.config: cosearch.CoSearchConfig = ctx.learner_config
        model, tokenizer = ctx.load_model(self.config.ranker_model or ctx.policy_model, ctx.seed + 1)
        model.train()
        self.policy = HFPolicy(model, tokenizer, config=HFPolicyConfig(seed=ctx.seed + 1, dtype=ctx.dtype))
        self.backend = PolicyChatBackend(self.policy, temperature=self.config.ranker_temperature, seed=ctx.seed)
        self.reference = frozen_copy(model, compute_dtype(ctx.dtype)) if self.config.kl_coef > 0 else None
        """A frozen copy of the ranker RL starts from (after its cold start, when it has one), for the k3 KL."""
        self.models: dict[str, torch.nn.Module] = {"ranker": model}
        if self.reference is not None and self.config.ranker_cold_start_steps > 0:
            # The cold-started ranker, which a resumed run cannot remake: checkpointed with the ranker.
            self.models["ranker_reference"] = self.reference
        self.optimizers = {"ranker": ctx.optimizer(model)}
        self.last_batch: cosearch.RankerBatch | None = None
        """The last `train_step`'s scores, groups and advantages, over the whole step's calls."""
        self._last_step: dict[str, Any] | None = None
        """The last `train_step`'s calls as `calls_view` shows them (`last_step`)."""

    gathers_env_calls: bool = True
    """The ranker is called from inside `env.step`, through a `GatheringBackend`: the trainer steps a turn's
    episodes side by side (`RolloutConfig.gather_env_calls`), so one turn's ranker calls are one batch."""

    def release_memory(self) -> None:
        self.policy.release_memory()

    def parts(self) -> tuple[list[torch.nn.Module], list[Any], list[torch.nn.Module]]:
        return [self.models["ranker"]], [self.optimizers["ranker"][0]], [self.reference] if self.reference is not None else []

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """The ranker decodes greedily while the policy is evaluated (greedy), and its replies are not kept
        for training; in RL steps it samples at `ranker_temperature`."""
        self.backend.greedy = True
        try:
            yield
        finally:
            self.backend.greedy = False

    def ranker(self):
        """An `LLMRanker` over this model's sampler, with the config's prompt and decoding settings."""
        from searchgym.backends.gather import GatheringBackend
        from searchgym.rankers.llm import LLMRanker, LLMRankerConfig

        c = self.config
        return LLMRanker(GatheringBackend(self.backend), LLMRankerConfig(max_doc_chars=c.ranker_max_doc_chars, max_tokens=c.ranker_max_tokens,
                                                        temperature=c.ranker_temperature))

    def env_options(self) -> dict[str, Any]:
        """The trained ranker behind search, choosing `top_k` of `ranker_candidates` retrieved documents."""
        return {"ranker": self.ranker(), "candidates": self.config.ranker_candidates}

    def cold_start(self, env: Any) -> dict[str, float]:
        """`ranker_cold_start_steps` supervised steps on the oracle reranks of `env`'s questions (the synthetic
        world's, or questions with gold titles: `searchgym.data.oracle`; skipped with a warning elsewhere);
        returns `ranker_cold_start/*` metrics."""
        from agents.learners.ranker_sft import supervised_ranker_steps

        c = self.config
        if c.ranker_cold_start_steps <= 0:
            return {}
        from searchgym.data.oracle import has_oracle

        records = getattr(env.unwrapped, "records", None)
        if not records or not has_oracle(records):
            logger.warning("ranker cold start skipped: %s has no oracle trajectories (the synthetic world's questions and "
                           "questions with gold titles have them); set ranker_cold_start_steps=0 to silence this",
                           type(env.unwrapped).__name__)
            return {"ranker_cold_start/steps": 0.0}
        if self.ctx.supervised_step is None:
            raise ConfigError("the ranker's cold start needs SecondModelContext.supervised_step (agents.train.sft.sft_step)")
        model = self.models["ranker"]
        losses = supervised_ranker_steps(
            model, self.policy.tokenizer, env, self.ranker().messages, steps=c.ranker_cold_start_steps, batch=c.ranker_cold_start_batch,
            lr=c.ranker_cold_start_lr, candidates=c.ranker_candidates, max_tokens=c.ranker_max_tokens, seed=self.ctx.seed,
            micro_batch=self.ctx.micro_batch, max_grad_norm=self.ctx.max_grad_norm, sft_step=self.ctx.supervised_step,
            shuffle=c.ranker_cold_start_shuffle)
        if self.ctx.synchronize is not None:
            # Every rank ran the same seeded steps on the same examples; rank 0's weights make the replicas
            # equal even where a device's kernels are not bit-reproducible.
            self.ctx.synchronize(model)
        self.policy.mark_updated()
        if self.reference is not None:
            # KL to the ranker RL starts from: the released model's output never parses as a rerank.
            self.reference.load_state_dict(model.state_dict())
        return {"ranker_cold_start/steps": float(len(losses)), "ranker_cold_start/loss_first": losses[0],
                "ranker_cold_start/loss_last": losses[-1]}

    @property
    def token_budget(self) -> int:
        """Tokens one ranker output may take: the config's `ranker_max_tokens`, within the sampler's cap."""
        return min(self.config.ranker_max_tokens, self.backend.max_tokens)

    def begin_step(self) -> None:
        self.backend.clear()

    def last_step(self) -> dict[str, Any] | None:
        """The last step's ranker calls with their Eq. 6 rewards and cluster advantages (`calls_view`)."""
        return self._last_step

    def mark_restored(self) -> None:
        self.policy.mark_updated()

    def train_step(self, trajectories: Sequence[Trajectory], env: Any) -> dict[str, float]:
        """Score, cluster and GRPO-update the ranker on this step's ranker calls."""
        calls, golds, r_main, gens = [], [], [], []
        texts = cosearch.corpus_texts(env.unwrapped.corpus)
        questions = []
        first = self.ctx.rank * len(trajectories)  # the step's index of this rank's first trajectory (equal shares)
        for i, t in enumerate(trajectories, first):
            f1 = outcome_reward(t.step_infos, "f1") if t.step_infos else 0.0
            recorded = [s for s in t.step_infos if s.get("ranker")]
            for call, info in zip(cosearch.calls_from_trajectory(t.step_infos, texts=texts, trajectory=i), recorded):
                gen = self.backend.take(info["ranker"]["messages"], info["ranker"]["raw_output"] or "")
                if gen is None:
                    continue  # a backend failure: nothing was sampled, nothing to train on
                calls.append(call)
                golds.append(t.gold_answers or [])
                r_main.append(f1)
                gens.append(gen)
                questions.append(getattr(t, "question_id", None) or call.question)
        offset = 0
        if self.ctx.gather_objects is not None:
            # Distributed: every rank scores and groups the whole step's calls (in rank order, as one process
            # would see them) and trains on its own calls' rows; the update sums the ranks' gradients.
            shares = self.ctx.gather_objects((calls, golds, r_main, questions))
            offset = sum(len(share[0]) for share in shares[: self.ctx.rank])
            calls, golds, r_main, questions = ([x for share in shares for x in share[k]] for k in range(4))
        if not calls:
            self._last_step = {"calls": [], "groups": 0, "dropped_small": 0, "dropped_flat": 0}
            return {"ranker/calls": 0.0}
        batch = cosearch.rank_batch(calls, golds, r_main, self.config, questions)
        self.last_batch = batch
        self._last_step = calls_view(calls, batch, questions, self.config.hit_ks, golds)
        mine = range(offset, offset + len(gens))
        targets = LearnerBatch(
            advantages=[torch.full((len(g.token_ids),), batch.advantages.get(i, 0.0)) for i, g in zip(mine, gens)],
            include=[i in batch.advantages for i in mine],
            rewards=[batch.scores[i].reward for i in mine],
        )
        model = self.models["ranker"]
        optimizer, scheduler = self.optimizers["ranker"]
        optimizer.zero_grad(set_to_none=True)
        c = self.config
        # The loss and its settings are the learner's, read from its config as for the policy; the ranker's
        # own generation budget is the norm length of seq-mean-token-sum-norm (Dr.GRPO).
        stats = self.ctx.policy_gradient_step(model, gens, targets, c.loss_settings(self.token_budget),
                                              pad_id=self.policy.tokenizer.pad_token_id, micro_batch=self.ctx.micro_batch,
                                              temperature=self.backend.temperature, reference=self.reference)
        if stats.loss_tokens:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], self.ctx.max_grad_norm)
            optimizer.step()
            # The warm-up counts the ranker's real updates (a step with no kept group has none).
            scheduler.step()
        self.policy.mark_updated()
        kept = cosearch.kept_order_rate(calls)
        return {
            **({"ranker/kept_order_rate": kept} if kept is not None else {}),
            "ranker/calls": float(len(calls)), "ranker/groups": float(len(batch.groups)),
            "ranker/reward": float(np.mean([s.reward for s in batch.scores])), "ranker/valid_rate": float(np.mean([c.valid for c in calls])),
            "ranker/loss": stats.loss, "ranker/clusters_dropped_small": float(batch.dropped_small),
            "ranker/clusters_dropped_flat": float(batch.dropped_flat), **cosearch.ranking_hits(calls, golds, c.hit_ks),
        }
