"""GSPO: the sequence-level loss on hand-built tensors, its config, its targets, and a training step via the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch

from agents.core import LossSettings, compute_policy_loss
from agents.learners.grpo import GRPOConfig
from agents.learners.grpo import batch_advantages as grpo_batch_advantages
from agents.learners.gspo import GSPOConfig, batch_advantages, gspo_loss, sequence_ratio
from agents.learners.registry import get_learner
from searchgym.errors import BatchError, ConfigError
from tests.agents.learners.infos import trajectory

# Two sequences of three tokens; old log-probs are 0, so each log-ratio is the new log-prob. Row 0: A = +1,
# log-ratios [0.3, -0.1, 0.1], mean 0.1, so s_0 = e^0.1 = 1.105171. Row 1: A = -0.5, loss tokens
# [-0.2, 0.1] (its third token is masked out), mean -0.05, so s_1 = e^-0.05 = 0.951229.
LOG_RATIOS = [[0.3, -0.1, 0.1], [-0.2, 0.1, 5.0]]
MASK = [[1, 1, 1], [1, 1, 0]]
ADV = [1.0, -0.5]
WIDE = LossSettings(name="gspo", eps_low=0.2, eps_high=0.28, aggregation="seq-mean")
"""Clip ranges that neither ratio reaches: [0.8, 1.28]."""


def batch(log_ratios=LOG_RATIOS, mask=MASK, adv=ADV):
    logprobs = torch.tensor(log_ratios, dtype=torch.float64).requires_grad_(True)
    return logprobs, torch.zeros_like(logprobs), torch.tensor(adv, dtype=torch.float64), torch.tensor(mask)


def gspo_by_formula(logprobs, old_logprobs, advantages, mask, eps_low, eps_high):
    """The paper's GSPO objective written directly: s_i from the sequence's mean log-ratio, clipped, the
    minimum with the unclipped term, averaged over sequences, negated to a loss."""
    m = mask.to(logprobs.dtype)
    s = torch.exp(((logprobs - old_logprobs) * m).sum(dim=1) / m.sum(dim=1))
    objective = torch.minimum(s * advantages, torch.clamp(s, 1 - eps_low, 1 + eps_high) * advantages)
    return -objective.mean()


def test_value_and_gradient_by_hand():
    lp, old, adv, mask = batch()
    out = gspo_loss(lp, old, adv, mask, WIDE)
    s0, s1 = math.exp(0.1), math.exp(-0.05)
    # Neither ratio is clipped: loss = mean over the 2 sequences of -s_i A_i = (-1.105171 + 0.475615) / 2
    assert out.loss.item() == pytest.approx((-s0 * 1.0 + s1 * 0.5) / 2)
    assert out.loss.item() == pytest.approx(-0.314778, abs=1e-6)
    out.loss.backward()
    # d s_i / d logp_t = s_i / |y_i| for each of row i's loss tokens, and the loss is -A_i s_i / 2:
    # row 0: -1.105171 / 3 / 2 = -0.184195 per token; row 1: 0.5 * 0.951229 / 2 / 2 = 0.118904; masked: 0.
    assert lp.grad.reshape(-1).tolist() == pytest.approx([-s0 / 6] * 3 + [s1 / 8, s1 / 8, 0.0])
    assert lp.grad[0, 0].item() == pytest.approx(-0.184195, abs=1e-6)
    assert lp.grad[1, 0].item() == pytest.approx(0.118904, abs=1e-6)
    # The ratio reported at each loss token is its sequence's s_i (1 off the mask); nothing is clipped.
    assert out.ratio_mean.item() == pytest.approx((3 * s0 + 2 * s1) / 5)
    assert out.clip_frac_high.item() == 0.0 and out.clip_frac_low.item() == 0.0


# Four sequences at the paper's ranges [1 - 3e-4, 1 + 4e-4] = [0.9997, 1.0004], 8 loss tokens in all:
#   row 0: A = +1, 3 tokens of log-ratio 0.001  -> s = e^0.001  = 1.0010005 > 1.0004: clipped high, loss -1.0004
#   row 1: A = -1, 2 tokens of log-ratio -0.001 -> s = e^-0.001 = 0.9990005 < 0.9997: clipped low,  loss  0.9997
#   row 2: A = +1, 1 token of log-ratio 0.0002  -> s = e^0.0002 = 1.0002 inside the range,          loss -e^0.0002
#   row 3: A = -1, 2 tokens of log-ratio 0.001  -> s = 1.0010005: with A < 0 the minimum is the unclipped
#          term -s, so no clip binds,                                                                  loss  e^0.001
PAPER_RATIOS = [[0.001, 0.001, 0.001], [-0.001, -0.001, 0.0], [0.0002, 0.0, 0.0], [0.001, 0.001, 0.0]]
PAPER_MASK = [[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 0]]
PAPER_ADV = [1.0, -1.0, 1.0, -1.0]


def test_clip_fractions_at_the_papers_ranges():
    lp, old, adv, mask = batch(PAPER_RATIOS, PAPER_MASK, PAPER_ADV)
    settings = GSPOConfig().loss_settings()
    assert (settings.eps_low, settings.eps_high) == (3e-4, 4e-4)
    out = compute_policy_loss(lp, old, adv, mask, settings)
    assert out.loss.item() == pytest.approx((-1.0004 + 0.9997 - math.exp(0.0002) + math.exp(0.001)) / 4, abs=1e-12)
    # Clip fractions are shares of loss tokens: row 0's 3 tokens cut high, row 1's 2 cut low, of 8.
    assert out.clip_frac_high.item() == pytest.approx(3 / 8) and out.clip_frac_low.item() == pytest.approx(2 / 8)
    e = math.exp
    assert out.ratio_mean.item() == pytest.approx((3 * e(0.001) + 2 * e(-0.001) + e(0.0002) + 2 * e(0.001)) / 8)
    out.loss.backward()
    # A clip cuts the whole sequence's gradient (rows 0 and 1); row 2: -s / 1 / 4; row 3: +s / 2 / 4 per token.
    expected = [0.0] * 3 + [0.0] * 3 + [-e(0.0002) / 4, 0.0, 0.0] + [e(0.001) / 8, e(0.001) / 8, 0.0]
    assert lp.grad.reshape(-1).tolist() == pytest.approx(expected)


@pytest.mark.parametrize("case", ["wide", "paper"])
def test_value_and_gradient_equal_the_papers_sequence_formula(case):
    """With one advantage per sequence the token form used here is GSPO itself."""
    rows, mask, adv, eps = ((LOG_RATIOS, MASK, ADV, (0.2, 0.28)) if case == "wide"
                            else (PAPER_RATIOS, PAPER_MASK, PAPER_ADV, (3e-4, 4e-4)))
    lp, old, a, m = batch(rows, mask, adv)
    out = gspo_loss(lp, old, a, m, LossSettings(name="gspo", eps_low=eps[0], eps_high=eps[1], aggregation="seq-mean"))
    out.loss.backward()
    lp2, old2, a2, m2 = batch(rows, mask, adv)
    reference = gspo_by_formula(lp2, old2, a2, m2, *eps)
    reference.backward()
    assert out.loss.item() == pytest.approx(reference.item(), abs=1e-12)
    torch.testing.assert_close(lp.grad, lp2.grad * m2)  # the formula's masked entries carry no gradient either


def test_per_token_advantages_give_gspo_token():
    # One sequence, s = e^0.1, per-token advantages [1, 0, -1]: token losses [-s, 0, +s] (no clip binds in
    # [0.8, 1.28]), mean 0; each token's gradient is -A_t * s / 3 (its own score, weighted by s / |y|).
    lp, old, _, mask = batch([LOG_RATIOS[0]], [MASK[0]], [0.0])
    out = gspo_loss(lp, old, torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64), mask, WIDE)
    assert out.loss.item() == pytest.approx(0.0, abs=1e-12)
    out.loss.backward()
    s = math.exp(0.1)
    assert lp.grad[0].tolist() == pytest.approx([-s / 3, 0.0, s / 3])


def test_masked_garbage_and_shapes():
    lp, old, adv, mask = batch()
    reference = gspo_loss(lp, old, adv, mask, WIDE).loss.item()
    lp2, old2, adv2, _ = batch()
    with torch.no_grad():
        old2[1, 2] = -math.inf  # padding: exp(inf) would poison the backward pass
    out = gspo_loss(lp2, old2, adv2, mask, WIDE)
    assert out.loss.item() == pytest.approx(reference)
    out.loss.backward()
    assert torch.isfinite(lp2.grad).all() and lp2.grad[1, 2].item() == 0.0
    # A row without loss tokens has s = 1 and leaves the sequence mean.
    assert sequence_ratio(lp, old, torch.tensor([[1, 1, 1], [0, 0, 0]])).tolist() == pytest.approx([math.exp(0.1), 1.0])
    with pytest.raises(BatchError, match="advantages"):
        gspo_loss(lp, old, torch.ones(3), mask, WIDE)
    with pytest.raises(BatchError, match="loss_mask"):
        gspo_loss(lp, old, adv, torch.ones(2, 4), WIDE)


def test_config_defaults_and_checks():
    config = GSPOConfig()
    assert (config.eps_low, config.eps_high, config.aggregation, config.kl_coef, config.clip_ratio_c) == (3e-4, 4e-4, "seq-mean", 0.0, None)
    assert config.loss_settings().name == "gspo" and get_learner("gspo").config is GSPOConfig
    with pytest.raises(ConfigError, match="no dual clip"):
        GSPOConfig(clip_ratio_c=3.0)
    with pytest.raises(ConfigError, match="eps_low"):
        GSPOConfig(eps_low=1.5)


def test_targets_are_grpos_group_advantages():
    class T:
        def __init__(self, group, em):
            self.group, self.step_infos, self.token_ids = group, trajectory(["search", "answer"], em=em), [1, 2, 3]

    trajectories = [T(0, 1.0), T(0, 0.0), T(1, 1.0), T(1, 1.0)]
    got = batch_advantages(trajectories, GSPOConfig())
    expected = grpo_batch_advantages(trajectories, GRPOConfig())
    # Group 0: rewards [1, 0], mean 0.5, sample std 0.7071: A = +-0.5 / (0.7071 + 1e-6) = +-0.7071; group 1 is flat: 0.
    assert [a[0].item() for a in got.advantages] == pytest.approx([0.70711, -0.70711, 0.0, 0.0], abs=1e-4)
    assert [a.tolist() for a in got.advantages] == [a.tolist() for a in expected.advantages]
    assert got.rewards == [1.0, 0.0, 1.0, 1.0] and got.include == [True] * 4


def test_micro_batches_give_the_same_gradient():
    """Sequences are never split between micro-batches and the step's denominator counts sequences, so any
    micro-batch size gives the full batch's gradient."""
    from agents.learners.batch import LearnerBatch
    from agents.models import TinyModelConfig, build_tiny_model
    from agents.rollout.trajectory import Segment, Trajectory
    from agents.train.update import policy_gradient_step

    grads = []
    for micro_batch in (4, 1, 3):
        model, tok = build_tiny_model(TinyModelConfig(seed=0))
        gen = torch.Generator().manual_seed(2)
        trajectories, advantages = [], []
        for i, length in enumerate((14, 9, 20, 12)):
            ids = torch.randint(5, 200, (length,), generator=gen).tolist()
            mask = [0] * 4 + [1] * (length - 4)
            # Old log-probs near a uniform sampler's over the 512-token vocabulary (log 1/512 = -6.24): the
            # sequence ratios are 0.94, 0.89, 1.00 and 0.96, so with eps 0.05 row 1 (A < 0) is clipped low.
            old = [(-6.5 + 0.5 * float(torch.rand(1, generator=gen))) * m for m in mask]
            trajectories.append(Trajectory(0, i, "q", None, None, ids, mask, old, [Segment("prompt", 0, 4, "", -1)], [], {}, 0.0, "answered"))
            advantages.append(torch.full((length,), (-1.0) ** i * (i + 1) / 2))
        targets = LearnerBatch(advantages=advantages, include=[True] * 4, rewards=[0.0] * 4)
        settings = GSPOConfig(eps_low=0.05, eps_high=0.05).loss_settings()
        stats = policy_gradient_step(model, trajectories, targets, settings, pad_id=tok.pad_token_id, micro_batch=micro_batch)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        assert stats.loss_tokens == 10 + 5 + 16 + 8
        assert stats.clip_frac_low == pytest.approx(5 / 39) and stats.clip_frac_high == 0.0
    assert any(g.abs().sum() > 0 for g in grads[0].values())
    for other in grads[1:]:
        for name, g in other.items():
            torch.testing.assert_close(g, grads[0][name], rtol=1e-4, atol=1e-6, msg=name)


TRAIN_ARGS = ["--model", "tiny", "--env.num-entities", "300", "--env.num-questions", "20", "--questions-per-step", "2",
              "--rollout.group-size", "2", "--rollout.max-turn-tokens", "12", "--rollout.max-response-tokens", "64",
              "--env.max-turns", "2", "--optim.micro-batch", "2", "--optim.lr", "1e-3", "--steps", "1", "--no-resume"]


def test_the_cli_trains_gspo_for_a_step(tmp_path, capsys):
    from agents.cli import build_parser, main
    from agents.cli.train import config_from_args

    args = ["train", "--learner", "gspo", "--learner.eps-high", "5e-4", *TRAIN_ARGS, "--out-dir", str(tmp_path / "run")]
    assert config_from_args(build_parser().parse_args(args)).learner == GSPOConfig(eps_high=5e-4)
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["learner"] == "gspo" and result["steps"] == 1
    assert math.isfinite(result["last"]["loss/policy"]) and result["last"]["loss/tokens"] > 0
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    assert "gspo: GRPO's group advantages with a clipped sequence-level importance ratio (GSPO)" in help_text
    assert "gspo: Upper clip of the sequence ratio s_i" in help_text and "gspo 0.0004" in help_text
