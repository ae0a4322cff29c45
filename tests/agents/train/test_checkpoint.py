"""Resuming takes the newest checkpoint that loads: a refused one is skipped with a warning naming it."""

from __future__ import annotations

import logging
import pickle

import pytest
import torch

from agents.train.checkpoint import (CheckpointError, drop_optimizer_states, list_checkpoints, load_checkpoint, load_newest_valid,
                                     load_policy_weights, save_checkpoint)
from agents.train.checkpoint_checks import read_verified_state


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
    assert not list(root.glob("*/.verified.json"))  # checked in full on every resume: nothing left behind


def test_when_no_checkpoint_loads_the_error_lists_each_refused_one(tmp_path):
    root = tmp_path / "checkpoints"
    _save_three(root)
    for path in list_checkpoints(root):
        (path / "policy.optim.pt").write_bytes(b"not a torch file")
    model, optimizer, scheduler = _model_and_optimizer(0)
    with pytest.raises(CheckpointError, match="no checkpoint.*loads") as caught:
        load_newest_valid(root, {"policy": model}, {"policy": (optimizer, scheduler)})
    assert all(f"step-00000{i}" in str(caught.value) for i in (1, 2, 3))


def test_a_finished_runs_checkpoint_without_its_optimizer_states_still_gives_its_weights_and_refuses_to_continue(tmp_path):
    root = tmp_path / "checkpoints"
    saved = _save_three(root)
    final = root / "step-000003"
    size = (final / "policy.optim.pt").stat().st_size
    assert drop_optimizer_states(final) == size > 0
    assert sorted(p.name for p in final.iterdir()) == ["manifest.json", "policy.safetensors", "state.json"]
    assert read_verified_state(final)["optimizer_states"] is False  # the manifest matches the files left
    model, optimizer, scheduler = _model_and_optimizer(99)
    load_policy_weights(final, model, "a linear layer")
    assert torch.equal(model.weight.detach(), saved[3])
    with pytest.raises(CheckpointError, match="only the final weights of a finished run"):
        load_checkpoint(final, {"policy": model}, {"policy": (optimizer, scheduler)})
    assert drop_optimizer_states(final) == 0  # nothing left to drop
    # Resuming a run whose newest checkpoint is such a one takes the full one before it, with a warning.
    path, _ = load_newest_valid(root, {"policy": model}, {"policy": (optimizer, scheduler)})
    assert path.name == "step-000002" and torch.equal(model.weight.detach(), saved[2])


def test_no_checkpoints_is_a_fresh_start(tmp_path):
    model, optimizer, scheduler = _model_and_optimizer(0)
    assert load_newest_valid(tmp_path / "none", {"policy": model}, {"policy": (optimizer, scheduler)}) is None


def test_a_checkpoint_records_every_file_and_reaches_the_disk_before_it_has_its_name(tmp_path, monkeypatch):
    import json
    import os

    from searchgym.retrieval.integrity import file_record

    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to name the synced files")
    monkeypatch.setattr(os, "fsync", fsync)
    root = tmp_path / "checkpoints"
    model, optimizer, scheduler = _model_and_optimizer(0)
    path = save_checkpoint(root, 4, {"policy": model}, {"policy": (optimizer, scheduler)}, {"position": 8})
    manifest = json.loads((path / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["policy.optim.pt", "policy.safetensors", "state.json"]
    for name, record in manifest["files"].items():
        assert record == file_record(path / name)
    # Flushed in the temporary folder (every file, then the folder), then the rename in the root.
    tmp = os.path.dirname(synced[0])
    assert sorted(os.path.basename(p) for p in synced[:4]) == ["manifest.json", "policy.optim.pt", "policy.safetensors", "state.json"]
    assert synced[4:] == [tmp, str(root)]
    assert json.loads((path / "state.json").read_text())["checkpoint_format"] == 2


def test_a_checkpoint_written_before_manifests_still_gets_every_other_check(tmp_path, caplog):
    import json

    root = tmp_path / "checkpoints"
    saved = _save_three(root)
    for path in list_checkpoints(root):  # as the previous version wrote them
        (path / "manifest.json").unlink()
        state = json.loads((path / "state.json").read_text())
        del state["checkpoint_format"]
        (path / "state.json").write_text(json.dumps(state))
    from safetensors.torch import load_file, save_file

    weights = load_file(str(root / "step-000003" / "policy.safetensors"))
    weights["bias"] = weights["bias"][:1].clone()  # would broadcast into the (3,) bias
    save_file(weights, str(root / "step-000003" / "policy.safetensors"))
    model, optimizer, scheduler = _model_and_optimizer(99)
    with caplog.at_level(logging.WARNING, logger="agents.train"):
        path, _ = load_newest_valid(root, {"policy": model}, {"policy": (optimizer, scheduler)})
    assert path.name == "step-000002" and torch.equal(model.weight.detach(), saved[2])
    assert "written before checkpoints recorded file hashes" in caplog.text
    assert "weight bias has shape (1,), the parameter (3,)" in caplog.text
