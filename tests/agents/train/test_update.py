import torch

from agents.models import build_tiny_model
from agents.rollout.batch import token_logprobs
from agents.train.update import pad_batch


def test_pad_batch_right_pads():
    out = pad_batch([[1, 2, 3], [4]], 0, torch.long)
    assert out.tolist() == [[1, 2, 3], [4, 0, 0]]


def test_selected_positions_match_full_logprobs():
    torch.manual_seed(0)
    model, _ = build_tiny_model()
    ids = torch.randint(0, 200, (2, 12))
    attention = torch.ones_like(ids)
    mask = torch.zeros_like(ids)
    mask[0, 5:9] = 1
    mask[1, 2:4] = 1
    full = token_logprobs(model, ids, attention, temperature=0.7)
    selected = token_logprobs(model, ids, attention, temperature=0.7, positions=mask)
    torch.testing.assert_close(selected, full * mask)
    # Each kept value is a real log-probability: negative, and the full row sums to 1 in probability.
    assert (selected[mask.bool()] < 0).all() and (selected[~mask.bool()] == 0).all()
    logits = model(input_ids=ids, attention_mask=attention).logits
    expected = torch.log_softmax(logits[0, 4] / 0.7, -1)[ids[0, 5]]
    torch.testing.assert_close(selected[0, 5], expected)


def _gradients(micro_batch: int, checkpointing: bool) -> dict[str, torch.Tensor]:
    """The gradient of one clipped-loss step over five trajectories of different lengths."""
    from agents.core import LossSettings
    from agents.learners.batch import LearnerBatch
    from agents.models import TinyModelConfig
    from agents.rollout.trajectory import Segment, Trajectory
    from agents.train.update import policy_gradient_step

    model, tok = build_tiny_model(TinyModelConfig(seed=0))
    model.train()
    if checkpointing:
        from agents.train.setup import enable_activation_checkpointing

        enable_activation_checkpointing(model)
        assert getattr(model, "is_activation_checkpointing", None) or model.is_gradient_checkpointing
    gen = torch.Generator().manual_seed(1)
    trajectories, advantages = [], []
    for i, length in enumerate((30, 9, 22, 15, 27)):
        ids = torch.randint(5, 200, (length,), generator=gen).tolist()
        mask = [0] * 4 + [1] * (length - 4)
        old = (-torch.rand(length, generator=gen) * 3).mul(torch.tensor(mask)).tolist()
        trajectories.append(Trajectory(0, i, "q", None, None, ids, mask, old, [Segment("prompt", 0, 4, "", -1)], [], {}, 0.0, "answered"))
        advantages.append(torch.full((length,), (-1.0) ** i * (i + 1) / 3))
    targets = LearnerBatch(advantages=advantages, include=[True] * 5, rewards=[0.0] * 5)
    settings = LossSettings(eps_low=0.2, eps_high=0.28, aggregation="token-mean")
    policy_gradient_step(model, trajectories, targets, settings, pad_id=tok.pad_token_id, micro_batch=micro_batch)
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_checkpointing_and_micro_batches_give_the_same_gradient():
    """Recomputing activations, and micro-batches of any size (formed from trajectories of similar length),
    change the gradient only by float rounding."""
    reference = _gradients(micro_batch=5, checkpointing=False)
    assert any(g.abs().sum() > 0 for g in reference.values())
    for micro_batch, checkpointing in ((5, True), (2, False), (1, True)):
        grads = _gradients(micro_batch, checkpointing)
        assert grads.keys() == reference.keys()
        for name, g in grads.items():
            torch.testing.assert_close(g, reference[name], rtol=1e-4, atol=1e-6, msg=name)
