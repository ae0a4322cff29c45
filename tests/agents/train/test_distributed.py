"""The data-parallel update under `accelerate`: one process equals a plain run, two equal one.

In process: `TrainConfig(distributed=True)` with a single process (an Accelerator on CPU, no process
group) gives the same losses and weights as the plain trainer, for RL steps, an update with nonzero
advantages and the cold start. Across processes: `accelerate launch --num_processes 2 --cpu` runs this
module as the worker; each rank updates on its half of a fixed batch, and the weights must equal a
single process's update on the whole batch; a real training step then must leave one metrics line and
one checkpoint, written by rank 0 only, and equal weights on both ranks.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agents.learners.batch import LearnerBatch
from agents.train import TrainConfig
from agents.train.config import EnvConfig, OptimConfig, RolloutConfig
from agents.train.checkpoint import list_checkpoints
from agents.train.distributed import make_accelerator, merge_metrics, shard
from agents.train.trainer import Trainer
from searchgym.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def tiny_config(out: Path, *, env: dict | None = None, rollout: dict | None = None, optim: dict | None = None, **top) -> TrainConfig:
    """A tiny random model on a small synthetic world; `env`, `rollout` and `optim` change those sections. In
    float32, whose arithmetic the equivalence checks hold to tight tolerances, whatever the CPU (bfloat16 runs
    are asked for by name)."""
    return TrainConfig(**{"model": "tiny", "steps": 2, "questions_per_step": 2, "out_dir": str(out), "dtype": "float32", **top},
                       env=EnvConfig(**{"num_entities": 300, "num_questions": 20, "hops": (1,), "max_turns": 2, **(env or {})}),
                       rollout=RolloutConfig(**{"group_size": 2, "max_turn_tokens": 12, "max_response_tokens": 64, **(rollout or {})}),
                       optim=OptimConfig(**{"micro_batch": 2, "lr": 1e-3, **(optim or {})}))


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The gradients the last update stepped with (summed over ranks and clipped)."""
    return {k: p.grad.detach().cpu().clone() for k, p in model.named_parameters() if p.grad is not None}


def synthetic_targets(trajectories, seed: int = 0) -> LearnerBatch:
    """Nonzero advantages (a random tiny model earns no reward, so its own targets carry no gradient), one
    trajectory dropped, as dynamic sampling or an over-long rollout would."""
    g = torch.Generator().manual_seed(seed)
    advantages = [torch.randn(len(t.token_ids), generator=g) for t in trajectories]
    include = [i != 1 for i in range(len(trajectories))]
    return LearnerBatch(advantages=advantages, include=include, rewards=[0.0] * len(trajectories))


def test_one_process_under_accelerate_equals_the_plain_run(tmp_path):
    plain = Trainer(tiny_config(tmp_path / "plain"))
    accel = Trainer(tiny_config(tmp_path / "accel", distributed=True))
    try:
        assert accel.accelerator is not None and accel.world == 1 and accel.is_main
        assert plain.accelerator is None
        for _ in range(2):
            a, b = plain.train_step(), accel.train_step()
            assert set(a) == set(b)
            for k in a:
                if not k.startswith(("time/", "perf/")):
                    assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
        # The same trajectories with nonzero advantages: the same loss and the same new weights.
        trajectories = plain.rollout_share([3, 4], plain.step)
        assert [t.token_ids for t in accel.rollout_share([3, 4], accel.step)] == [t.token_ids for t in trajectories]
        targets = synthetic_targets(trajectories)
        sa, na = plain.update(trajectories, targets)
        sb, nb = accel.update(trajectories, targets)
        assert sa.loss_tokens == sb.loss_tokens > 0 and float(na) > 0
        assert sa.loss == pytest.approx(sb.loss, rel=1e-6) and float(na) == pytest.approx(float(nb), rel=1e-6)
        assert sa.ratio_mean == pytest.approx(sb.ratio_mean, rel=1e-6)
        wa, wb = weights(plain.model), weights(accel.model)
        for k in wa:
            torch.testing.assert_close(wa[k], wb[k], rtol=0, atol=0, msg=k)
        assert [p.name for p in list_checkpoints(tmp_path / "accel" / "checkpoints")] == ["step-000001", "step-000002"]
    finally:
        plain.close()
        accel.close()


def test_cold_start_under_accelerate_equals_the_plain_one(tmp_path):
    optim = {"cold_start_steps": 2, "cold_start_batch": 4, "cold_start_lr": 3e-3}
    plain = Trainer(tiny_config(tmp_path / "plain", optim=optim))
    accel = Trainer(tiny_config(tmp_path / "accel", distributed=True, optim=optim))
    try:
        assert plain.cold_start() == pytest.approx(accel.cold_start(), rel=1e-6)
        wa, wb = weights(plain.model), weights(accel.model)
        assert all(torch.equal(wa[k], wb[k]) for k in wa)
    finally:
        plain.close()
        accel.close()


def test_bad_distributed_settings_are_config_errors(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="device must be 'cpu' or 'cuda'"):
        make_accelerator("cuda:1")
    with pytest.raises(ConfigError, match="split evenly"):
        shard([1, 2, 3], 0, 2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="pass --distributed"):
        Trainer(tiny_config(tmp_path / "b"))


def test_metrics_merge_sums_counts_and_averages_means(tmp_path):
    from accelerate import Accelerator

    acc = Accelerator(cpu=True)
    merged = merge_metrics(acc, {"rollout/episodes": 4.0, "rollout/em": 0.5, "time/step_s": 2.0})
    assert merged == {"rollout/episodes": 4.0, "rollout/em": 0.5, "time/step_s": 2.0}


# -- two processes ------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_batch(path: Path, trajectories, targets: LearnerBatch) -> None:
    torch.save({
        "token_ids": [list(t.token_ids) for t in trajectories], "loss_mask": [list(t.loss_mask) for t in trajectories],
        "logprobs": [list(t.logprobs) for t in trajectories], "advantages": targets.advantages, "include": targets.include,
    }, path)


def run_two_ranks(launcher: str, module: str, folder: Path, timeout_s: int) -> None:
    """`torchrun` 2 processes of `python -m module folder` on loopback; fails with their stderr, skips where
    gloo cannot open a socket. (`accelerate launch --cpu` starts several CPU processes only through mpirun;
    torchrun starts them directly, and the trainer's Accelerator(cpu=True) then joins them over gloo.)"""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("WORLD_SIZE", None)
    cmd = [launcher, "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), "-m", module, str(folder)]
    try:
        done = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the 2-process run did not finish in {timeout_s} s: {(e.stderr or '')[-2000:]}")
    if done.returncode != 0 and "Errno 97" in done.stderr:
        pytest.skip("torch.distributed cannot open a gloo socket here")
    assert done.returncode == 0, done.stderr[-4000:]


def assert_update_matches(got: dict, expected_weights: dict, expected_grads: dict, rank: int) -> None:
    """A rank's summed gradients and updated weights (`got["grads"]`, `got["weights"]`) against one process's
    update over the whole batch (lr 1e-3)."""
    assert got["grads"].keys() == expected_grads.keys()
    for k in expected_grads:
        torch.testing.assert_close(got["grads"][k], expected_grads[k], rtol=1e-4, atol=1e-7, msg=f"rank {rank}: {k}")
    # Adam's first step is about lr * sign(grad): a gradient entry within rounding of 0 can flip sign
    # when the two halves are summed in another order, so a weight may differ by up to 2 * lr.
    diffs = torch.cat([(got["weights"][k] - expected_weights[k]).abs().reshape(-1) for k in expected_weights])
    assert float((diffs > 1e-5).float().mean()) < 1e-3 and float(diffs.max()) <= 2.1e-3


class _Row:
    def __init__(self, token_ids, loss_mask, logprobs):
        self.token_ids, self.loss_mask, self.logprobs = token_ids, loss_mask, logprobs


@pytest.mark.slow
def test_two_processes_update_like_one_and_only_rank_0_writes(tmp_path):
    launcher = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if launcher is None:
        pytest.skip("torchrun is not installed here")
    # The single-process reference: a fixed batch of 4 questions x G=2 with nonzero advantages.
    ref = Trainer(tiny_config(tmp_path / "ref", steps=1, questions_per_step=4))
    try:
        trajectories = ref.rollout_share([0, 1, 2, 3], 0)
        targets = synthetic_targets(trajectories)
        _write_batch(tmp_path / "batch.pt", trajectories, targets)
        stats, _ = ref.update(trajectories, targets)
        expected, expected_grads = weights(ref.model), grads(ref.model)
    finally:
        ref.close()

    run_two_ranks(launcher, "tests.agents.train.test_distributed", tmp_path, timeout_s=150)

    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # The update: each rank had half the batch; the summed gradient gives the single-process weights.
    assert [r["rows"] for r in reports] == [4, 4]
    for r in reports:
        assert r["loss_tokens"] == stats.loss_tokens
        assert r["loss"] == pytest.approx(stats.loss, rel=1e-5, abs=1e-7)
    for rank in (0, 1):
        assert_update_matches(torch.load(tmp_path / f"update-rank{rank}.pt", weights_only=True), expected, expected_grads, rank)
    # The training step: rank 0 alone logged and checkpointed; both ranks hold the same weights after it.
    assert [r["saves"] for r in reports] == [1, 0]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1  # a second writer would have appended its own line and json.loads(lines[0])["step"] == 1
    assert json.loads(lines[0])["rollout/episodes"] == 8.0  # 4 questions x G=2 over both ranks
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == ["step-000001"]
    final = [torch.load(tmp_path / f"final-rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    assert all(torch.equal(final[0][k], final[1][k]) for k in final[0])


def _worker(folder: Path) -> None:
    """One rank of the 2-process test (run by `accelerate launch -m tests.agents.train.test_distributed`)."""
    import agents.train.trainer_state as trainer_module  # where Trainer.save calls save_checkpoint

    counts = {"saves": 0}
    real_save = trainer_module.save_checkpoint

    def counting_save(*args, **kwargs):
        counts["saves"] += 1
        return real_save(*args, **kwargs)

    # A spy: it counts this rank's checkpoint writes and still writes them.
    trainer_module.save_checkpoint = counting_save
    trainer = Trainer(tiny_config(folder / "run", steps=1, questions_per_step=4, distributed=True))
    try:
        assert trainer.world == 2
        batch = torch.load(folder / "batch.pt", weights_only=True)
        rows = shard(list(range(len(batch["token_ids"]))), trainer.rank, trainer.world)
        mine = [_Row(batch["token_ids"][i], batch["loss_mask"][i], batch["logprobs"][i]) for i in rows]
        targets = LearnerBatch(advantages=[batch["advantages"][i] for i in rows], include=[batch["include"][i] for i in rows], rewards=[0.0] * len(rows))
        stats, _ = trainer.update(mine, targets)
        torch.save({"weights": weights(trainer.model), "grads": grads(trainer.model)}, folder / f"update-rank{trainer.rank}.pt")
        trainer.run()
        torch.save(weights(trainer.model), folder / f"final-rank{trainer.rank}.pt")
        report = {"rows": len(rows), "loss": stats.loss, "loss_tokens": stats.loss_tokens, **counts}
        (folder / f"rank{trainer.rank}.json").write_text(json.dumps(report))
    finally:
        trainer.close()


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
