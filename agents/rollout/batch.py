"""Trajectories as padded tensors for a learner, and teacher-forced token logprobs.

Alignment convention (shared with `Trajectory`): column t of every (N, T) tensor describes token t;
`old_logprobs[:, t]` is the sampler's log p(token t | tokens < t). `token_logprobs` returns the same
alignment from a forward pass, so `token_logprobs(model, ...) - batch.old_logprobs` is the log ratio a
clipped policy loss needs, to be read where `loss_mask` is 1 (column 0 is never a sampled token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agents.precision import autocast, output_logits
from agents.rollout.trajectory import Trajectory
from searchgym.errors import ConfigError


@dataclass
class RolloutBatch:
    """N trajectories right-padded to length T."""

    input_ids: torch.Tensor
    """(N, T) long; padding is `pad_token_id`."""
    attention_mask: torch.Tensor
    """(N, T) long; 1 on real tokens (prompt, agent, observation), 0 on padding."""
    loss_mask: torch.Tensor
    """(N, T) float; 1 on tokens the policy sampled, 0 on prompt, observation and padding. Copied from the
    trajectories, never derived from token values."""
    old_logprobs: torch.Tensor
    """(N, T) float; the sampler's logprobs where `loss_mask` is 1, 0 elsewhere."""
    round_index: torch.Tensor
    """(N, T) long; the agent turn a sampled token belongs to (0, 1, ...), -1 elsewhere. Per-round
    advantages (CW-GRPO) broadcast with `adv_rounds.gather(1, round_index.clamp(min=0))`."""
    rewards: torch.Tensor
    """(N,) float."""
    group: torch.Tensor
    """(N,) long; the question each trajectory answers."""
    finish_reasons: list[str]

    def to(self, device: str | torch.device) -> RolloutBatch:
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.__dict__.items()}
        return RolloutBatch(**moved)


def collate(trajectories: Sequence[Trajectory], pad_token_id: int) -> RolloutBatch:
    if not trajectories:
        raise ConfigError("collate needs at least one trajectory")
    n, width = len(trajectories), max(len(t.token_ids) for t in trajectories)
    input_ids = torch.full((n, width), int(pad_token_id), dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    loss_mask = torch.zeros((n, width), dtype=torch.float32)
    old = torch.zeros((n, width), dtype=torch.float32)
    rounds = torch.full((n, width), -1, dtype=torch.long)
    for i, t in enumerate(trajectories):
        length = len(t.token_ids)
        input_ids[i, :length] = torch.tensor(t.token_ids, dtype=torch.long)
        attention[i, :length] = 1
        loss_mask[i, :length] = torch.tensor(t.loss_mask, dtype=torch.float32)
        old[i, :length] = torch.tensor(t.logprobs, dtype=torch.float32)
        for k, (start, end) in enumerate(t.rounds):
            rounds[i, start:end] = k
    return RolloutBatch(
        input_ids=input_ids,
        attention_mask=attention,
        loss_mask=loss_mask,
        old_logprobs=old * loss_mask,
        round_index=rounds,
        rewards=torch.tensor([t.reward for t in trajectories], dtype=torch.float32),
        group=torch.tensor([t.group for t in trajectories], dtype=torch.long),
        finish_reasons=[t.finish_reason for t in trajectories],
    )


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    positions: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """(N, T) teacher-forced `log_softmax(logits / temperature)` of each token given the tokens before it;
    column 0 is 0. `temperature` 0 is treated as 1 (greedy sampling reports unscaled logprobs).

    With `positions` (an (N, T) 0/1 mask, usually the loss mask) only those tokens are scored and the rest
    are 0: the vocabulary projection and its softmax are a step's largest tensors (N x T x V floats), and
    most tokens (prompt, retrieved documents) never enter a loss.

    `dtype` bfloat16 runs the decoder under autocast (`agents.precision`): its matrix products in bfloat16,
    the float32 weights cast as they are used; the vocabulary projection and the softmax stay float32, so
    this gives the numbers of an `HFPolicy` of that dtype.

    Right padding only (as `collate` produces): positions follow from the attention mask.
    """
    scale = 1.0 if temperature == 0 else float(temperature)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    if positions is None and dtype == torch.float32:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits.float()
        logp = torch.log_softmax(logits[:, :-1] / scale, dim=-1).gather(-1, input_ids[:, 1:, None])[..., 0]
        return torch.cat([logp.new_zeros((logp.shape[0], 1)), logp], dim=1) * attention_mask.to(logp.dtype)
    with autocast(dtype, input_ids.device):
        hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).last_hidden_state
    if positions is None:
        positions = attention_mask
    # The logit that predicts token t comes from the hidden state at t - 1.
    rows, cols = positions[:, 1:].nonzero(as_tuple=True)
    scored, targets = hidden[rows, cols], input_ids[rows, cols + 1]
    if not scored.requires_grad:  # nothing is kept for a backward pass: chunks bound the logits' memory for free
        pieces = [_picked(model, h, t, scale) for h, t in zip(scored.split(HEAD_CHUNK), targets.split(HEAD_CHUNK))]
    elif _recomputes(model):
        from torch.utils.checkpoint import checkpoint

        # A model that recomputes its layers' activations recomputes each chunk's logits too, rather than keep them.
        pieces = [checkpoint(_picked, model, h, t, scale, use_reentrant=False)
                  for h, t in zip(scored.split(HEAD_CHUNK), targets.split(HEAD_CHUNK))]
    else:
        pieces = [_picked(model, scored, targets, scale)]
    picked = torch.cat(pieces) if pieces else scored.new_zeros(0)
    return torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device).index_put((rows, cols + 1), picked.float())


HEAD_CHUNK = 512
"""Scored tokens whose vocabulary logits exist at once without gradients, and with activation checkpointing
(`OptimConfig.gradient_checkpointing`; a chunk's logits are 49,152 floats a token for SmolLM2: 0.2 MB): a
micro-batch of four ~600-token trajectories scores ~1,000 tokens, whose logits, log-softmax and gradients
would take ~0.8 GB at the update's peak. With checkpointing, each chunk's logits are recomputed in the
backward pass (the same numbers, one more vocabulary projection per scored token); without it, the update
keeps them all, as before, and spends no time on a recompute."""


def _picked(model: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, scale: float) -> torch.Tensor:
    """(K,) `log_softmax(logits / scale)` at `targets` from (K, H) hidden states."""
    logits = output_logits(model, hidden) / scale
    return torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None])[:, 0]


def _recomputes(model: torch.nn.Module) -> bool:
    """Whether `model` recomputes its layers' activations in backward (transformers >= 5.2x names it
    `is_activation_checkpointing`, earlier versions `is_gradient_checkpointing`)."""
    flag = getattr(model, "is_activation_checkpointing", None)
    return bool(getattr(model, "is_gradient_checkpointing", False) if flag is None else flag)
