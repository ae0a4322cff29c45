"""Damaged checkpoints: every kind falls back to an intact checkpoint (a warning naming the damaged file) and
resumes exactly as the uninterrupted run, or stops with `CheckpointError` when none is intact; never a silent
load, a raw traceback or a crashed process.

- Whole weights: every kind of `tools.fuzz_checkpoint` (raw damage and wrong values written with a
  matching manifest), resumed in a child process as the tool does.
- Sharded (FSDP2, 2 processes over gloo): the kinds of `tests/reliability/sharded_faults.py`.
- End to end: `python -m agents train` resumed after its newest checkpoint's optimizer state was given the
  wrong shapes (what once segfaulted in fused AdamW) ends with the uninterrupted run's metrics and weights.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="checkpoints need torch (pip install searchgym[agents])")

from tools import fuzz_checkpoint  # noqa: E402 - needs torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "built"
    fuzz_checkpoint.build(folder)
    return folder


@pytest.fixture(scope="module")
def outcomes(built, tmp_path_factory):
    return fuzz_checkpoint.run_kinds(built, list(fuzz_checkpoint.KINDS), tmp_path_factory.mktemp("damaged"))


def test_the_tool_covers_at_least_35_kinds_on_every_file():
    kinds = fuzz_checkpoint.KINDS
    assert len(kinds) >= 35
    targets = {k.target for k in kinds.values()}
    assert targets == {"policy.safetensors", "policy.optim.pt", "state.json", "manifest.json"}
    assert sum(k.every for k in kinds.values()) >= 2  # kinds where no intact checkpoint is left


@pytest.mark.parametrize("kind", sorted(fuzz_checkpoint.KINDS))
def test_a_damaged_checkpoint_falls_back_exactly_or_stops_with_a_typed_error(outcomes, kind):
    outcome, detail = outcomes[kind]
    expected = "stopped with CheckpointError" if fuzz_checkpoint.KINDS[kind].every else "fell back to step-000002, resumed exactly"
    assert outcome == expected, detail


def test_an_undamaged_copy_is_reported_as_a_silent_load(built, tmp_path):
    """The tool can fail: resuming from checkpoints with nothing wrong takes the newest, which for a damage
    kind would be a silent load."""
    import shutil

    shutil.copytree(built / "checkpoints", tmp_path / "intact")
    outcome, _ = fuzz_checkpoint.resume_outcome(built, "weights: deleted", tmp_path / "intact")
    assert outcome == "loaded silently"


def test_a_refused_checkpoint_leaves_the_live_model_and_optimizer_untouched(built, tmp_path):
    import torch

    from agents.train.checkpoint import CheckpointError, load_newest_valid

    root = fuzz_checkpoint.damaged_copy(built, "every checkpoint: a NaN weight, manifests re-recorded", tmp_path)
    model, (optimizer, scheduler) = fuzz_checkpoint._model_and_optimizer(7)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rng = torch.get_rng_state()
    with pytest.raises(CheckpointError, match=r"no checkpoint .* loads") as caught:
        load_newest_valid(root, {"policy": model}, {"policy": (optimizer, scheduler)})
    assert all(f"step-00000{i}" in str(caught.value) for i in (1, 2, 3))
    assert "policy.safetensors: weight 0.weight holds NaN" in str(caught.value)
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    assert optimizer.state_dict()["state"] == {} and torch.equal(torch.get_rng_state(), rng)


# -- sharded checkpoints ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_damaged_sharded_checkpoints_fall_back_exactly_or_stop(tmp_path):
    from tests.agents.train.test_distributed import _free_port

    port, procs = str(_free_port()), []
    log = open(tmp_path / "ranks.log", "ab")  # noqa: SIM115 - closed below
    for rank in (0, 1):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "NUMBA_DISABLE_JIT": "1", "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.reliability.sharded_faults", str(tmp_path)], cwd=ROOT,
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
    try:
        codes = [p.wait(400) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()  # a rank this test started
        log.close()
    text = (tmp_path / "ranks.log").read_text(errors="replace")
    if any(codes) and "Errno 97" in text:
        pytest.skip("torch.distributed cannot open a gloo socket here")
    assert codes == [0, 0], text[-4000:]
    results = [json.loads(line) for line in (tmp_path / "outcomes.jsonl").read_text().splitlines()]
    from tests.reliability.sharded_faults import KINDS

    assert [r["kind"] for r in results] == list(KINDS)
    for r in results:
        if r["every"]:
            assert r["outcome"] == "stopped" and r["named"], r
        else:
            assert (r["outcome"], r["named"], r["same_as_uninterrupted"]) == ("fell back to step-000002", True, True), r


# -- end to end: the training CLI ---------------------------------------------------------------------------


def _wrong_shaped_moments(folder: Path) -> None:
    fuzz_checkpoint._optim(lambda s: s["optimizer"]["state"][0].__setitem__(
        "exp_avg", s["optimizer"]["state"][0]["exp_avg"][:1].clone()))(folder)


@pytest.mark.slow
def test_a_training_run_resumes_past_a_damaged_checkpoint_to_the_uninterrupted_result(tmp_path):
    from tests.reliability.test_kill_resume import (STEPS, assert_same_state, checkpoint_steps, final_state, finish_run,
                                                    metrics_rows, start_run)

    straight_dir, damaged_dir = tmp_path / "straight", tmp_path / "damaged"
    straight = start_run(straight_dir, STEPS)
    finish_run(start_run(damaged_dir, STEPS), damaged_dir)
    # The finished run's newest checkpoint damaged, and the same command run again: it resumes from the one
    # before, does the last step again and must end where the uninterrupted run ended.
    _wrong_shaped_moments(damaged_dir / "checkpoints" / f"step-{STEPS:06d}")
    finish_run(start_run(damaged_dir, STEPS), damaged_dir)
    finish_run(straight, straight_dir)

    log = (tmp_path / "damaged.log").read_text(errors="replace")
    assert re.search(rf"refused checkpoint \S+step-{STEPS:06d}: \S+policy.optim.pt: optimizer state 'exp_avg' of "
                     r"parameter 0 has shape \(1, ", log), log[-3000:]
    assert re.search(rf"resumed from \S+step-{STEPS - 1:06d} ", log)
    assert checkpoint_steps(damaged_dir) == checkpoint_steps(straight_dir) == [STEPS - 1, STEPS]
    assert metrics_rows(damaged_dir) == metrics_rows(straight_dir)
    assert_same_state(final_state(damaged_dir), final_state(straight_dir))
