"""Sharded updates (FSDP2) on CPU over gloo with 2 processes and a tiny model built from a config.

- One update on fixed trajectories: the 2-process sharded weights (with activation checkpointing) equal a
  single process's update on the whole batch; the gathered whole weights equal the in-process rollout replica and the streamed model
  folder; the sharded checkpoint exported by `python -m agents export` loads with `from_pretrained` and gives
  the same logits.
- A whole-weights checkpoint exports to the same kind of folder, every weight from the checkpoint.
- A 2-process training run SIGKILLed after its first checkpoint resumes to the same metrics, weights and
  optimizer state as an uninterrupted run.
- Bad settings are ConfigErrors before any process group work.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from agents.learners.batch import LearnerBatch
from agents.train import TrainConfig
from agents.train.checkpoint import CheckpointError, list_checkpoints
from agents.train.distributed import shard
from agents.cli import main as agents_main
from agents.train.export import export_checkpoint, load_sharded_model
from agents.train.trainer import Trainer
from searchgym.errors import ConfigError
from tests.agents.train.test_distributed import _free_port, _Row, _write_batch, synthetic_targets, tiny_config, weights

ROOT = Path(__file__).resolve().parents[3]
LR = 1e-4
"""Small enough that Adam's first step (about lr * g / (|g| + eps)) moves a weight by less than the atol for
gradient entries whose sign is float noise."""


class Ranks:
    """The 2 ranks of a run, started as torchrun would start them (RANK, WORLD_SIZE, MASTER_ADDR/PORT), but
    directly: torchrun puts its workers in sessions of their own, so a SIGKILL to it leaves them running,
    while these pids are the ranks themselves."""

    def __init__(self, args: list[str], log: Path):
        port = str(_free_port())
        self.log_path = log
        self.log = open(log, "ab")  # noqa: SIM115 - closed in wait/kill
        self.procs = []
        for rank in (0, 1):
            env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "NUMBA_DISABLE_JIT": "1",
                   "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
            self.procs.append(subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT))

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()  # SIGKILL, to a rank this test started
        for p in self.procs:
            p.wait(30)
        self.log.close()

    def wait(self, timeout_s: float = 280) -> None:
        deadline = time.monotonic() + timeout_s
        try:
            codes = [p.wait(max(1.0, deadline - time.monotonic())) for p in self.procs]
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the 2-process run did not finish in {timeout_s:g} s: {self.log_path.read_text(errors='replace')[-3000:]}")
        self.log.close()
        text = self.log_path.read_text(errors="replace")
        if any(codes) and "Errno 97" in text:
            pytest.skip("torch.distributed cannot open a gloo socket here")
        assert codes == [0, 0], text[-4000:]


def test_bad_sharding_settings_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="--distributed"):
        tiny_config(tmp_path, sharding="fsdp2")
    with pytest.raises(ConfigError, match="cosearch"):
        tiny_config(tmp_path, learner="cosearch", distributed=True, sharding="fsdp2")
    with pytest.raises(ConfigError, match="lora"):
        tiny_config(tmp_path, distributed=True, sharding="fsdp2", optim={"lora": True})
    with pytest.raises(ConfigError, match="cpu_offload"):
        tiny_config(tmp_path, distributed=True, sharding="fsdp2", cpu_offload=True)
    with pytest.raises(ConfigError, match="sharding must be one of"):
        tiny_config(tmp_path, distributed=True, sharding="zero3")
    with pytest.raises(ConfigError, match="weight_sync='disk'"):
        tiny_config(tmp_path, distributed=True, sharding="fsdp2",
                    rollout={"backend": "sglang", "sglang_urls": ("http://127.0.0.1:1",), "weight_sync": "tensors"})
    # One process (an Accelerator without a process group): nothing to shard.
    with pytest.raises(ConfigError, match="at least 2 processes"):
        Trainer(tiny_config(tmp_path / "one", distributed=True, sharding="fsdp2"))


def test_export_writes_a_whole_weights_checkpoint_as_a_model_folder(tmp_path, capsys):
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM

    trainer = Trainer(tiny_config(tmp_path / "run", steps=1))
    try:
        trainer.run()
        trained = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    finally:
        trainer.close()
    (checkpoint,) = list_checkpoints(tmp_path / "run" / "checkpoints")[-1:]
    assert agents_main(["export", str(checkpoint), str(tmp_path / "out")]) == 0
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    for n, p in exported.named_parameters():
        assert torch.equal(p, trained[n]), n
    assert (tmp_path / "out" / "tokenizer_config.json").is_file()
    # Every weight comes from the checkpoint, not from the model the run started from: shifted there, shifted here.
    shifted = tmp_path / "shifted"
    shutil.copytree(checkpoint, shifted)
    save_file({n: t + 0.5 for n, t in load_file(str(checkpoint / "policy.safetensors")).items()}, str(shifted / "policy.safetensors"))
    exported = AutoModelForCausalLM.from_pretrained(export_checkpoint(shifted, tmp_path / "out-shifted"))
    for n, p in exported.named_parameters():
        assert torch.equal(p, trained[n] + 0.5), n
    # A checkpoint folder without weights, or with weights of another model, is refused, naming what is wrong.
    with pytest.raises(CheckpointError, match="neither"):
        export_checkpoint(tmp_path, tmp_path / "nothing")
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    save_file({"not.a.weight": torch.zeros(2)}, str(broken / "policy.safetensors"))
    assert agents_main(["export", str(broken), str(tmp_path / "out2")]) == 2
    assert "unknown weights ['not.a.weight']" in capsys.readouterr().err
    # A sharded checkpoint (the DCP folder marks it) is refused by a run without sharding, saying why.
    fake = tmp_path / "sharded" / "checkpoints" / checkpoint.name
    shutil.copytree(checkpoint, fake)
    (fake / "policy.dcp").mkdir()
    with pytest.raises(CheckpointError, match="holds FSDP2 shards"):
        Trainer(tiny_config(tmp_path / "sharded", steps=1))


@pytest.mark.slow
def test_two_sharded_processes_update_like_one_and_export_whole_weights(tmp_path):
    ref = Trainer(tiny_config(tmp_path / "ref", steps=1, questions_per_step=4, optim={"lr": LR}))
    try:
        initial = weights(ref.model)
        trajectories = ref.rollout_share([0, 1, 2, 3], 0)
        targets = synthetic_targets(trajectories)
        # Rank 1's share loses two more trajectories: it runs one micro-batch to rank 0's two.
        targets = LearnerBatch(advantages=targets.advantages, include=[keep and i < 6 for i, keep in enumerate(targets.include)],
                               rewards=targets.rewards)
        _write_batch(tmp_path / "batch.pt", trajectories, targets)
        stats, norm = ref.update(trajectories, targets)
        expected = weights(ref.model)
    finally:
        ref.close()
    assert max(float((expected[k] - initial[k]).abs().max()) for k in expected) > LR / 2  # the update moved the weights

    Ranks(["-m", "tests.agents.train.test_fsdp", "update", str(tmp_path)], tmp_path / "workers.log").wait()

    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in reports:
        assert r["loss_tokens"] == stats.loss_tokens
        assert r["loss"] == pytest.approx(stats.loss, rel=1e-5, abs=1e-7)
        assert r["grad_norm"] == pytest.approx(float(norm), rel=1e-5)
    # Streamed: no bucket over the limit unless one tensor alone is (the embedding here), every weight once.
    buckets = reports[0]["buckets"]
    assert len(buckets) > 2 and all(sum(n for _, n in b) <= 4096 or len(b) == 1 for b in buckets)
    assert len(list((tmp_path / "streamed").glob("model-*-of-*.safetensors"))) == len(buckets)
    gathered = torch.load(tmp_path / "gathered.pt", weights_only=True)
    assert sorted(name for b in buckets for name, _ in b) == sorted(gathered)
    replicas = [torch.load(tmp_path / f"replica-rank{r}.pt", weights_only=True) for r in (0, 1)]
    # `weights` lists a tied weight under both names; the gather lists it once.
    assert set(gathered) <= set(expected) and set(expected) - set(gathered) <= {"lm_head.weight"}
    for k in gathered:
        torch.testing.assert_close(gathered[k], expected[k], rtol=1e-5, atol=1e-6, msg=k)
        for replica in replicas:
            assert torch.equal(replica[k], gathered[k]), k  # the rollout replica holds exactly the gathered weights

    # The streamed model folder and the exported checkpoint load as plain models with the gathered weights.
    from transformers import AutoModelForCausalLM

    streamed = AutoModelForCausalLM.from_pretrained(tmp_path / "streamed")
    (checkpoint,) = list_checkpoints(tmp_path / "run" / "checkpoints")
    exported = AutoModelForCausalLM.from_pretrained(export_checkpoint(checkpoint, tmp_path / "exported"))
    for model in (streamed, exported):
        state = model.state_dict()
        assert all(torch.equal(state[k], gathered[k]) for k in gathered)
    plain, _ = load_sharded_model(checkpoint)
    ids = torch.tensor([[5, 17, 42, 99, 7, 3]])
    with torch.no_grad():
        logits = [m(input_ids=ids).logits for m in (plain, streamed, exported)]
    assert torch.equal(logits[0], logits[1]) and torch.equal(logits[0], logits[2])


def _update_worker(folder: Path) -> None:
    """One rank of the update test: half of the fixed batch, one sharded update, the whole weights out."""
    # With activation checkpointing (the single-process reference runs without it): the same gradient.
    trainer = Trainer(tiny_config(folder / "run", steps=1, questions_per_step=4, distributed=True, sharding="fsdp2",
                                  optim={"lr": LR, "gradient_checkpointing": True}))
    try:
        assert trainer.world == 2 and trainer.sharded is not None
        batch = torch.load(folder / "batch.pt", weights_only=True)
        rows = shard(list(range(len(batch["token_ids"]))), trainer.rank, trainer.world)
        mine = [_Row(batch["token_ids"][i], batch["loss_mask"][i], batch["logprobs"][i]) for i in rows]
        targets = LearnerBatch(advantages=[batch["advantages"][i] for i in rows], include=[batch["include"][i] for i in rows],
                               rewards=[0.0] * len(rows))
        stats, norm = trainer.update(mine, targets)
        trainer.sync_weights()
        buckets = [[(name, t.numel() * t.element_size()) for name, t in bucket] for bucket in trainer.sharded.full_tensors(bucket_bytes=4096)]
        gathered = {name: t for bucket in trainer.sharded.full_tensors(bucket_bytes=4096) for name, t in bucket}
        trainer.sharded.save_pretrained_streamed(folder / "streamed", trainer.tokenizer, write=trainer.is_main, bucket_bytes=4096)
        trainer.step = 1
        trainer.save()
        torch.save(weights(trainer.model), folder / f"replica-rank{trainer.rank}.pt")
        if trainer.is_main:
            torch.save(gathered, folder / "gathered.pt")
        report = {"loss": stats.loss, "loss_tokens": stats.loss_tokens, "grad_norm": float(norm), "buckets": buckets}
        (folder / f"rank{trainer.rank}.json").write_text(json.dumps(report))
    finally:
        trainer.close()


# -- kill -9 and resume -------------------------------------------------------------------------------------

STEPS = 3


def _train(out_dir: Path) -> Ranks:
    from tests.reliability.test_kill_resume import TRAIN_ARGS

    out_dir.mkdir(parents=True, exist_ok=True)
    return Ranks(["-m", "agents", "train", "--distributed", "--sharding", "fsdp2", *TRAIN_ARGS, "--steps", str(STEPS), "--out-dir", str(out_dir)],
                 out_dir.parent / f"{out_dir.name}.log")


def _final_state(out_dir: Path) -> dict:
    """Model and optimizer state of the last checkpoint, whole, read in this process."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    last = out_dir / "checkpoints" / f"step-{STEPS:06d}"
    dcp_to_torch_save(last / "policy.dcp", out_dir / "final.pt")
    return torch.load(out_dir / "final.pt", weights_only=False)


@pytest.mark.slow
def test_sigkilled_sharded_run_resumes_to_the_same_metrics_and_weights(tmp_path):
    from tests.reliability.test_kill_resume import assert_same_state, checkpoint_steps, metrics_rows, temp_folders

    straight_dir, killed_dir = tmp_path / "straight", tmp_path / "killed"
    straight = _train(straight_dir)
    killed = _train(killed_dir)
    started = time.monotonic()
    # Killed once its first RL checkpoint exists: in step 2, its save, or the step after.
    while killed.running() and 1 not in checkpoint_steps(killed_dir) and time.monotonic() - started < 240:
        time.sleep(0.01)
    landed = killed.running()
    killed.kill()
    assert landed, killed.log_path.read_text(errors="replace")[-3000:]
    assert checkpoint_steps(killed_dir)[-1] < STEPS
    _train(killed_dir).wait(240)
    straight.wait(240)
    assert re.search(r"resumed from \S+step-00000[12] ", killed.log_path.read_text(errors="replace"))  # mid-run, not after the end

    assert not temp_folders(killed_dir)
    assert checkpoint_steps(killed_dir) == checkpoint_steps(straight_dir) == [STEPS - 1, STEPS]
    expected, got = metrics_rows(straight_dir), metrics_rows(killed_dir)
    assert [r["step"] for r in expected] == list(range(STEPS + 1))  # the cold start's line, then one per step
    assert got == expected
    assert_same_state(_final_state(killed_dir), _final_state(straight_dir))
    # A random model earns no reward, and the KL's reference is the cold-started policy, kept whole beside the
    # shards: the RL steps leave the weights where the cold start put them, and a resume that lost the
    # reference would have moved them (its KL to the model as built) away from the uninterrupted run's.
    from safetensors.torch import load_file

    def reference(out_dir: Path) -> dict:
        return load_file(str(out_dir / "checkpoints" / f"step-{STEPS:06d}" / "reference.safetensors"))

    assert_same_state(reference(killed_dir), reference(straight_dir))


@pytest.mark.slow
def test_sharded_run_pushes_whole_weights_to_a_loopback_sglang_server(tmp_path):
    from tests.agents.train.test_trainer_sglang import fake_server, same_weights, weights as server_weights
    from tests.reliability.test_kill_resume import TRAIN_ARGS

    out = tmp_path / "run"
    with fake_server() as fake:
        start = server_weights(fake.policy.model)
        Ranks(["-m", "agents", "train", "--distributed", "--sharding", "fsdp2", *TRAIN_ARGS, "--steps", "1", "--out-dir", str(out),
               "--rollout.backend", "sglang", "--rollout.sglang-urls", fake.url, "--rollout.weight-sync", "disk"],
              tmp_path / "run.log").wait()
        pushed = server_weights(fake.policy.model)
        loads = [body for _, path, body in fake.calls if path == "/update_weights_from_disk"]
        generated = sum(path == "/generate" for _, path, _ in fake.calls)
    # Rank 0 alone asked the server to load: at the start, after the cold start and after the step.
    assert [b["weight_version"] for b in loads] == ["1", "2", "3"] and fake.weight_version == "3"
    assert generated >= 4  # both ranks' rollouts (2 questions x G=2) were sampled there
    (checkpoint,) = list_checkpoints(out / "checkpoints")
    final, _ = load_sharded_model(checkpoint)
    assert not same_weights(start, pushed)
    assert same_weights(pushed, server_weights(final))  # the last push is the trained weights, tied ones included


if __name__ == "__main__":
    if sys.argv[1] == "update":
        _update_worker(Path(sys.argv[2]))
