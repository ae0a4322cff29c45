"""Cold start: supervised steps on oracle trajectories (E-GRPO starts from one): the synthetic world's, or
for questions with gold titles one search per title (`searchgym.data.oracle`).

Each example is built exactly as a rollout would be: the chat-templated prompt, then for each oracle turn
its tokens (trained on) and the env's real observation (not trained on), concatenated segment by segment,
so the format the policy learns is the one the rollout engine feeds it. With
`OptimConfig.cold_start_shows="gold"` the observations are those of the env with its gold-passage ranker
(`searchgym.rankers.GoldPassageRanker`): each hop's gold passage first, so that an oracle turn that reads a
fact has been shown it, even where the retriever puts a decoy first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import gymnasium as gym
import numpy as np
import torch

from agents.rollout.batch import token_logprobs
from agents.train.distributed import all_reduce_sum, shard, sum_gradients
from agents.train.setup import adamw
from agents.train.update import pad_batch
from searchgym.data.oracle import has_oracle, oracle_turns


@dataclass
class Example:
    token_ids: list[int]
    loss_mask: list[int]


def chat_prompt(tokenizer, observation: str) -> str:
    """The rollout engine's prompt: the env's first observation as one user message of the chat template."""
    return tokenizer.apply_chat_template([{"role": "user", "content": observation}], add_generation_prompt=True, tokenize=False)


def oracle_example(env: gym.Env, tokenizer, index: int) -> Example:
    """Token ids and loss mask of the oracle trajectory of question `index` of `env`."""
    base = env.unwrapped
    obs, _ = env.reset(options={"index": index})
    ids = tokenizer.encode(chat_prompt(tokenizer, obs), add_special_tokens=False)
    mask = [0] * len(ids)
    for turn in oracle_turns(base.record):
        turn_ids = tokenizer.encode(turn, add_special_tokens=False)
        ids += turn_ids
        mask += [1] * len(turn_ids)
        obs, _, terminated, truncated, _ = env.step(turn)
        if terminated or truncated:
            break
        obs_ids = tokenizer.encode(obs, add_special_tokens=False)
        ids += obs_ids
        mask += [0] * len(obs_ids)
    return Example(ids, mask)


def sft_step(
    model: torch.nn.Module, examples: Sequence[Example], *, pad_id: int, micro_batch: int,
    total: int | None = None, backward: Callable[[torch.Tensor], None] | None = None,
    logprobs: Callable[..., torch.Tensor] | None = None, dtype: torch.dtype = torch.float32,
) -> float:
    """Accumulate the gradient of the mean negative log-likelihood of the masked tokens; returns the loss.

    Data parallel: `total` is the masked-token count over every rank's examples (so the ranks' gradients
    and losses sum to the single-process ones), `backward` replaces `loss.backward()` and `logprobs` replaces
    `token_logprobs(model, ...)` (as in `policy_gradient_step`); `dtype` is the forward passes' precision."""
    if total is None:
        total = sum(sum(e.loss_mask) for e in examples)
    device = next(model.parameters()).device
    if logprobs is None:
        logprobs = partial(token_logprobs, model, dtype=dtype)
    loss_sum = 0.0
    for start in range(0, len(examples), micro_batch):
        chunk = examples[start : start + micro_batch]
        ids = pad_batch([e.token_ids for e in chunk], pad_id, torch.long).to(device)
        attention = pad_batch([[1] * len(e.token_ids) for e in chunk], 0, torch.long).to(device)
        mask = pad_batch([e.loss_mask for e in chunk], 0, torch.float32).to(device)
        loss = -(logprobs(ids, attention, positions=mask) * mask).sum() / total
        if backward is None:
            loss.backward()
        else:
            backward(loss)
        loss_sum += float(loss.detach())
    return loss_sum



def cold_start_env(trainer) -> gym.Env:
    """The env the cold start's oracle trajectories step: the trainer's training env, or with
    `cold_start_shows="gold"` one over the same questions whose searches show the gold passages first."""
    c = trainer.config
    if c.optim.cold_start_shows == "retriever":
        return trainer.env
    from agents.train import setup

    return gym.make(c.env.id, **{**setup.env_kwargs(c, "train", trainer.out / "cache"), "ranker": "gold"})


def cold_start(trainer) -> list[float]:
    """`cold_start_steps` supervised steps of `trainer.model` on oracle trajectories of its env's questions
    (`cold_start_env`), with a fresh AdamW at `cold_start_lr`, after passing over `cold_start_skip` batches
    of the seeded question stream; returns each step's loss (over every rank)."""
    c = trainer.config
    if c.optim.cold_start_steps <= 0:
        return []
    if not has_oracle(trainer.env.unwrapped.records):
        raise ValueError("cold start needs oracle trajectories: the synthetic world's questions, or questions with gold "
                         "titles and an answer (searchgym.data.oracle)")
    env = cold_start_env(trainer)
    model, tokenizer, acc, sharded = trainer.model, trainer.tokenizer, trainer.accelerator, trainer.sharded
    params = sharded.parameters() if sharded is not None else [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(params, c.optim.cold_start_lr, c.optim.adamw)
    rng = np.random.default_rng([c.seed, 7])
    for _ in range(c.optim.cold_start_skip):  # an earlier cold start's batches (`OptimConfig.cold_start_skip`)
        rng.choice(trainer.num_questions, c.optim.cold_start_batch, replace=False)
    losses = []
    for _ in range(c.optim.cold_start_steps):
        chosen = [int(i) for i in rng.choice(trainer.num_questions, c.optim.cold_start_batch, replace=False)]
        optimizer.zero_grad(set_to_none=True)
        if acc is None:
            batch = [oracle_example(env, tokenizer, i) for i in chosen]
            losses.append(sft_step(model, batch, pad_id=tokenizer.pad_token_id, micro_batch=c.optim.micro_batch, dtype=trainer.compute_dtype))
            torch.nn.utils.clip_grad_norm_(params, c.optim.max_grad_norm)
        else:
            batch = [oracle_example(env, tokenizer, i) for i in shard(chosen, trainer.rank, trainer.world)]
            (total,) = all_reduce_sum(acc, [sum(sum(e.loss_mask) for e in batch)])
            if sharded is not None:
                # As in the RL update: FSDP2 sums the ranks' gradients, every rank runs as many passes.
                local, _ = sharded.accumulate(
                    len(batch), c.optim.micro_batch, tokenizer.pad_token_id, c.optim.max_grad_norm,
                    lambda: sft_step(sharded.root, batch, pad_id=tokenizer.pad_token_id, micro_batch=c.optim.micro_batch,
                                     total=int(total), logprobs=sharded.root))
            else:
                with acc.no_sync(trainer.wrapped):
                    local = sft_step(model, batch, pad_id=tokenizer.pad_token_id, micro_batch=c.optim.micro_batch, total=int(total),
                                     backward=acc.backward, dtype=trainer.compute_dtype)
                sum_gradients(acc, params)
                acc.clip_grad_norm_(params, c.optim.max_grad_norm)
            losses.append(all_reduce_sum(acc, [local])[0])
        optimizer.step()
    return losses
