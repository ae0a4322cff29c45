"""`OptimConfig.adamw`: torch's three AdamW implementations give the same update; the trainer uses the
configured one, for RL and for the cold start."""

from __future__ import annotations

import pytest
import torch

from agents.models import TinyModelConfig, build_tiny_model
from agents.train.config import OptimConfig
from agents.train.setup import adamw, make_optimizer
from searchgym.errors import ConfigError


def _steps(implementation: str, steps: int = 3) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model, _ = build_tiny_model(TinyModelConfig())
    optimizer, scheduler = make_optimizer(model, 1e-3, 1, implementation)
    ids = torch.randint(5, 100, (2, 12))
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        scheduler.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_fused_foreach_and_for_loop_adamw_take_the_same_steps():
    start = _steps("fused", steps=0)
    fused, foreach, loop = _steps("fused"), _steps("foreach"), _steps("for-loop")
    assert max(float((fused[k] - start[k]).abs().max()) for k in fused) > 1e-3  # the steps moved the weights
    for name in fused:
        # lr 1e-3 moves each weight by ~3e-3 over the three steps; the implementations agree to rounding.
        torch.testing.assert_close(fused[name], foreach[name], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(loop[name], foreach[name], rtol=1e-5, atol=1e-6)


def test_the_implementation_is_the_one_asked_for():
    param = torch.nn.Parameter(torch.zeros(3))
    assert adamw([param], 1e-3, "fused").defaults["fused"] is True
    assert adamw([param], 1e-3, "foreach").defaults["foreach"] is True
    assert adamw([param], 1e-3, "for-loop").defaults["foreach"] is False
    assert OptimConfig().adamw == "fused"


def test_an_unknown_implementation_is_a_config_error():
    with pytest.raises(ConfigError, match="adamw must be one of fused, foreach, for-loop"):
        OptimConfig(adamw="sgd")


def test_an_implementation_torch_refuses_is_a_config_error_naming_the_option(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")

    monkeypatch.setattr(torch.optim, "AdamW", refuse)
    with pytest.raises(ConfigError, match="AdamW's fused implementation is not available here .*optim.adamw='foreach'"):
        adamw([torch.nn.Parameter(torch.zeros(3))], 1e-3, "fused")
