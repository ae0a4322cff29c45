"""Resuming takes the newest checkpoint that loads: a refused one is skipped with a warning naming it."""

from __future__ import annotations

import logging
import pickle

import pytest
import torch

from agents.train.checkpoint import CheckpointError, list_checkpoints, load_newest_valid, save_checkpoint


def _model_and_optimizer(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    return model, optimizer, scheduler


def _save_three(root):
    saved = {}
    for step in (1, 2, 3):
        model, optimizer, scheduler = _model_and_optimizer(step)
        save_checkpoint(root, step, {"policy": model}, {"policy": (optimizer, scheduler)}, {"position": step * 10}, keep=3)
        saved[step] = model.weight.detach().clone()
    return saved


class _Payload:
    def __reduce__(self):
        return (print, ("unpickled",))


@pytest.mark.parametrize("damage", ["planted pickle", "truncated weights", "no state"])
def test_a_refused_latest_checkpoint_falls_back_to_the_one_before_with_a_warning(tmp_path, caplog, damage):
    root = tmp_path / "checkpoints"
    saved = _save_three(root)
    latest = root / "step-000003"
    if damage == "planted pickle":
        (latest / "policy.optim.pt").write_bytes(pickle.dumps(_Payload()))
    elif damage == "truncated weights":
        data = (latest / "policy.safetensors").read_bytes()
        (latest / "policy.safetensors").write_bytes(data[: len(data) // 2])
    else:
        (latest / "state.json").write_text("{}")
    model, optimizer, scheduler = _model_and_optimizer(99)
    with caplog.at_level(logging.WARNING, logger="agents.train.checkpoint"):
        path, state = load_newest_valid(root, {"policy": model}, {"policy": (optimizer, scheduler)})
    assert path.name == "step-000002" and state["position"] == 20
    assert torch.equal(model.weight.detach(), saved[2])
    assert "refused checkpoint" in caplog.text and "step-000003" in caplog.text


def test_when_no_checkpoint_loads_the_error_lists_each_refused_one(tmp_path):
    root = tmp_path / "checkpoints"
    _save_three(root)
    for path in list_checkpoints(root):
        (path / "policy.optim.pt").write_bytes(b"not a torch file")
    model, optimizer, scheduler = _model_and_optimizer(0)
    with pytest.raises(CheckpointError, match="no checkpoint.*loads") as caught:
        load_newest_valid(root, {"policy": model}, {"policy": (optimizer, scheduler)})
    assert all(f"step-00000{i}" in str(caught.value) for i in (1, 2, 3))


def test_no_checkpoints_is_a_fresh_start(tmp_path):
    model, optimizer, scheduler = _model_and_optimizer(0)
    assert load_newest_valid(tmp_path / "none", {"policy": model}, {"policy": (optimizer, scheduler)}) is None
