import math

import pytest
import torch

from agents.core import aggregate, clipped_policy_loss, clipped_surrogate, k3_kl
from searchgym.errors import BatchError, ConfigError

# Two sequences of three tokens. old log-probs are 0, so ratio = exp(logp) and logp = log(ratio).
# Row 0 has A = +1, ratios [1.5, 0.7, 1.1]; row 1 has A = -1, ratios [0.5, 1.2, 2.0] with its last
# token masked out (e.g. retrieved text). Clip range with eps_low 0.2, eps_high 0.28 is [0.8, 1.28].
RATIOS = [[1.5, 0.7, 1.1], [0.5, 1.2, 2.0]]
MASK = [[1, 1, 1], [1, 1, 0]]
ADV = [1.0, -1.0]
# Per-token loss -min(r A, clip(r) A):
#   row 0 (A=+1): r=1.5 -> -min(1.5, 1.28) = -1.28 (cut high); r=0.7 -> -min(0.7, 0.8) = -0.7 (A > 0:
#   the low clip does not bind); r=1.1 -> -1.1
#   row 1 (A=-1): r=0.5 -> max(0.5, 0.8) = 0.8 (cut low); r=1.2 -> 1.2; r=2.0 -> masked -> 0
EXPECTED_TOKENS = [[-1.28, -0.7, -1.1], [0.8, 1.2, 0.0]]
TOKEN_SUM = -1.28 - 0.7 - 1.1 + 0.8 + 1.2  # -1.08 over 5 loss tokens


def batch(ratios=RATIOS, mask=MASK):
    logprobs = torch.tensor(ratios, dtype=torch.float64).log().requires_grad_(True)
    return logprobs, torch.zeros_like(logprobs), torch.tensor(ADV, dtype=torch.float64), torch.tensor(mask)


def test_per_token_clipped_loss_both_sides():
    lp, old, adv, mask = batch()
    loss, ratio, clip_high, clip_low = clipped_surrogate(lp, old, adv, mask)
    assert loss.reshape(-1).tolist() == pytest.approx(EXPECTED_TOKENS[0] + EXPECTED_TOKENS[1])
    assert clip_high.tolist() == [[True, False, False], [False, False, False]]
    assert clip_low.tolist() == [[False, False, False], [True, False, False]]
    assert ratio[1, 2].item() == 1.0  # masked: log-ratio zeroed


def test_token_mean_loss_and_gradient():
    lp, old, adv, mask = batch()
    out = clipped_policy_loss(lp, old, adv, mask)
    assert out.loss.item() == pytest.approx(TOKEN_SUM / 5)  # -0.216
    assert out.loss.item() == pytest.approx(-0.216)
    assert out.clip_frac_high.item() == pytest.approx(1 / 5)
    assert out.clip_frac_low.item() == pytest.approx(1 / 5)
    assert out.ratio_mean.item() == pytest.approx((1.5 + 0.7 + 1.1 + 0.5 + 1.2) / 5)  # 1.0
    out.loss.backward()
    # d/dlogp of -r A / 5 is -r A / 5 where unclipped; clipped tokens and masked tokens get 0:
    # row 0: [0, -0.7/5, -1.1/5]; row 1: [0, +1.2/5, 0]
    assert lp.grad.reshape(-1).tolist() == pytest.approx([0.0, -0.14, -0.22, 0.0, 0.24, 0.0])


def test_seq_mean_differs_from_token_mean():
    lp, old, adv, mask = batch()
    out = clipped_policy_loss(lp, old, adv, mask, aggregation="seq-mean")
    # row 0 mean -3.08 / 3 = -1.026667; row 1 mean 2.0 / 2 = 1.0; mean of the two = -0.013333
    assert out.loss.item() == pytest.approx((-3.08 / 3 + 1.0) / 2)
    assert out.loss.item() == pytest.approx(-0.0133333, abs=1e-6)


def test_symmetric_clip_cuts_lower():
    lp, old, adv, mask = batch()
    out = clipped_policy_loss(lp, old, adv, mask, eps_high=0.2)
    # r=1.5 with A=+1 is now cut at 1.2 instead of 1.28: (-1.2 - 0.7 - 1.1 + 0.8 + 1.2) / 5 = -0.2
    assert out.loss.item() == pytest.approx(-0.2)


def test_sequence_advantages_broadcast_like_token_advantages():
    lp, old, adv, mask = batch()
    per_seq = clipped_policy_loss(lp, old, adv, mask).loss
    per_tok = clipped_policy_loss(lp, old, adv[:, None].expand(2, 3), mask).loss
    assert per_seq.item() == pytest.approx(per_tok.item())


def test_masked_tokens_contribute_nothing_even_if_garbage():
    lp, old, adv, mask = batch()
    reference = clipped_policy_loss(lp, old, adv, mask).loss.item()
    lp2, old2, adv2, _ = batch()
    with torch.no_grad():
        old2[1, 2] = -math.inf  # a padding position: exp(inf) would poison the backward pass
        lp2[1, 2] = 50.0
    out = clipped_policy_loss(lp2, old2, adv2, mask)
    assert out.loss.item() == pytest.approx(reference)
    out.loss.backward()
    assert torch.isfinite(lp2.grad).all() and lp2.grad[1, 2].item() == 0.0


def test_denominator_and_dr_grpo_norm():
    lp, old, adv, mask = batch()
    # a micro-batch of a step with 10 loss tokens in all: -1.08 / 10
    assert clipped_policy_loss(lp, old, adv, mask, denominator=10).loss.item() == pytest.approx(-0.108)
    # Dr.GRPO: token sum / norm_length, mean over the B = 2 rows: -1.08 / 4 / 2 = -0.135
    out = clipped_policy_loss(lp, old, adv, mask, aggregation="seq-mean-token-sum-norm", norm_length=4)
    assert out.loss.item() == pytest.approx(-0.135)
    with pytest.raises(ConfigError, match="norm_length"):
        clipped_policy_loss(lp, old, adv, mask, aggregation="seq-mean-token-sum-norm")


def test_fully_masked_row_is_left_out_of_seq_mean():
    lp, old, adv, _ = batch()
    mask = torch.tensor([[1, 1, 1], [0, 0, 0]])
    # only row 0 counts: -3.08 / 3 for both aggregations
    assert clipped_policy_loss(lp, old, adv, mask, aggregation="seq-mean").loss.item() == pytest.approx(-3.08 / 3)
    assert clipped_policy_loss(lp, old, adv, mask).loss.item() == pytest.approx(-3.08 / 3)


def test_all_masked_gives_zero_with_a_graph():
    lp, old, adv, _ = batch()
    out = clipped_policy_loss(lp, old, adv, torch.zeros(2, 3))
    assert out.loss.item() == 0.0
    out.loss.backward()
    assert lp.grad.abs().sum().item() == 0.0


def test_k3_values():
    # pi = 0.5, ref = 0.25: r = ref/pi = 0.5 -> 0.5 - 1 - ln 0.5 = ln 2 - 0.5 = 0.193147
    # pi = 0.25, ref = 0.5: r = 2 -> 2 - 1 - ln 2 = 0.306853; equal -> 0; masked -> 0 even with ref = -inf
    lp = torch.tensor([[0.5, 0.25, 0.3, 0.1]]).log()
    ref = torch.tensor([[0.25, 0.5, 0.3, 0.0]]).log()
    kl = k3_kl(lp, ref, torch.tensor([[1, 1, 1, 0]]))
    assert kl[0].tolist() == pytest.approx([math.log(2) - 0.5, 1 - math.log(2), 0.0, 0.0])


def test_k3_expectation_is_the_exact_kl():
    # E_pi[k3] = sum pi (ref/pi - 1 - log(ref/pi)) = 1 - 1 + KL(pi||ref).
    # pi = [0.5, 0.25, 0.25], ref = [0.25, 0.5, 0.25]: KL = 0.5 ln 2 + 0.25 ln 0.5 = 0.25 ln 2 = 0.173287
    pi = torch.tensor([[0.5, 0.25, 0.25]])
    ref = torch.tensor([[0.25, 0.5, 0.25]])
    expected = (pi * k3_kl(pi.log(), ref.log())).sum().item()
    assert expected == pytest.approx(0.25 * math.log(2))


def test_kl_term_is_added_with_its_coefficient():
    lp, old, adv, mask = batch()
    ref = torch.tensor(RATIOS, dtype=torch.float64).log()
    with torch.no_grad():
        ref[0, 0] = math.log(0.75)  # token (0,0): pi = 1.5, ref = 0.75 -> r = 0.5 -> k3 = ln 2 - 0.5
    out = clipped_policy_loss(lp, old, adv, mask, ref_logprobs=ref, kl_coef=0.1)
    kl_mean = (math.log(2) - 0.5) / 5  # one non-zero k3 among 5 loss tokens
    assert out.kl.item() == pytest.approx(kl_mean)
    assert out.loss.item() == pytest.approx(-0.216 + 0.1 * kl_mean)
    assert set(out.metrics()) == {
        "loss/total",
        "loss/policy",
        "loss/kl",
        "loss/clip_frac_high",
        "loss/clip_frac_low",
        "loss/ratio_mean",
    }


def test_kl_needs_a_reference_and_shapes_are_checked():
    lp, old, adv, mask = batch()
    with pytest.raises(ConfigError, match="ref_logprobs"):
        clipped_policy_loss(lp, old, adv, mask, kl_coef=0.1)
    with pytest.raises(BatchError, match="advantages"):
        clipped_policy_loss(lp, old, torch.ones(3), mask)
    with pytest.raises(BatchError, match="loss_mask"):
        clipped_policy_loss(lp, old, adv, torch.ones(2, 4))
    with pytest.raises(ConfigError, match="aggregation"):
        aggregate(torch.ones(2, 3), torch.ones(2, 3), "sum")  # type: ignore[arg-type]
