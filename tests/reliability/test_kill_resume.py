"""No data lost: a training run killed with SIGKILL at seeded points resumes from its last checkpoint and ends
with the same per-step metrics and the same final weights and optimizer state as an uninterrupted run.

Each run is `python -m agents train` (the CLI), with a tiny random model on SearchQA-Synthetic-v0 and a
checkpoint after every step. A random model never earns a reward, so its advantages are all zero; a short
cold start on oracle trajectories moves it away from its starting weights, and the k3 KL's reference is the
cold-started policy, kept in every checkpoint (`reference.safetensors`). So the RL steps leave the weights
where the cold start put them, and a resume that lost the cold start's weights or the reference shows:
restored from the model as built, the reference would differ from the policy and its KL would move the
weights of the resumed run away from the uninterrupted run's.

Kill points are drawn from a seeded RNG, each tied to the run's progress rather than to wall time:
- `metrics`: up to 150 ms after the next step's metrics line appears (between logging and checkpointing,
  inside the checkpoint write, or in a later step);
- `saving`: the moment a checkpoint's temporary folder exists (mid-write);
- `start`: some seconds after the process starts (imports, world building, cold start, step 1).

As a benchmark with more kill points: `python -m tests.reliability.test_kill_resume --kills 12 --seed 1`
prints every kill and whether the run survived it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="training needs torch (pip install searchgym[agents])")
pytest.importorskip("transformers", reason="training needs transformers (pip install searchgym[agents])")

ROOT = Path(__file__).resolve().parents[2]
STEPS = 4
TRAIN_ARGS = (
    "--model", "tiny", "--learner", "grpo", "--env.num-entities", "300", "--env.num-questions", "20", "--questions-per-step", "2",
    "--rollout.group-size", "2", "--rollout.max-turn-tokens", "12", "--rollout.max-response-tokens", "64", "--env.max-turns", "2",
    "--optim.micro-batch", "4", "--optim.lr", "1e-3", "--learner.kl-coef", "0.1", "--optim.cold-start-steps", "1",
    "--optim.cold-start-batch", "2", "--optim.cold-start-lr", "3e-3", "--checkpoint-every", "1", "--seed", "0",
)  # fmt: skip
RUN_TIMEOUT_S = 240.0


def train_command(out_dir: Path, steps: int = STEPS, dtype: str = "float32") -> list[str]:
    return [sys.executable, "-m", "agents", "train", *TRAIN_ARGS, "--steps", str(steps), "--out-dir", str(out_dir), "--dtype", dtype]


def _env() -> dict[str, str]:
    # One intra-op thread: the same kernels in every process whatever else runs on the machine. bm25s's
    # numba kernels would spend ~9 s compiling in every process that searches (each cold start does);
    # interpreted they are instant on this small corpus and rank the same (the metrics agree either way).
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
            "NUMBA_DISABLE_JIT": "1"}


def start_run(out_dir: Path, steps: int = STEPS, dtype: str = "float32") -> subprocess.Popen:
    out_dir.mkdir(parents=True, exist_ok=True)
    log = open(out_dir.parent / f"{out_dir.name}.log", "ab")  # noqa: SIM115 - closed with the process below
    proc = subprocess.Popen(train_command(out_dir, steps, dtype), cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    proc.log = log  # type: ignore[attr-defined]
    return proc


def finish_run(proc: subprocess.Popen, out_dir: Path, timeout_s: float = RUN_TIMEOUT_S) -> None:
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"training run in {out_dir} took over {timeout_s:g} s") from None
    finally:
        proc.log.close()  # type: ignore[attr-defined]
    log = (out_dir.parent / f"{out_dir.name}.log").read_text(errors="replace")
    assert code == 0, f"training run in {out_dir} exited with {code}:\n{log[-3000:]}"


# -- progress of a run, read from its files ---------------------------------------------------------------


def checkpoint_steps(out_dir: Path) -> list[int]:
    from agents.train.checkpoint import list_checkpoints

    return [int(p.name.split("-")[1]) for p in list_checkpoints(out_dir / "checkpoints")]


def metric_steps(out_dir: Path) -> list[int]:
    path = out_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text().splitlines():
        try:
            steps.append(int(json.loads(line)["step"]))
        except (ValueError, KeyError):
            steps.append(-1)  # a line cut short by the kill
    return steps


def temp_folders(out_dir: Path) -> set[str]:
    """Checkpoint folders being written (or left by a run killed while writing one)."""
    folder = out_dir / "checkpoints"
    return {p.name for p in folder.iterdir() if p.name.startswith(".tmp-")} if folder.is_dir() else set()


def last_logged_step(out_dir: Path, since_ns: int) -> int | None:
    """The step of the last metrics line, when the file was written after `since_ns` (else None)."""
    path = out_dir / "metrics.jsonl"
    try:
        if path.stat().st_mtime_ns < since_ns:
            return None
    except FileNotFoundError:
        return None
    steps = metric_steps(out_dir)
    return steps[-1] if steps else None


@dataclass
class Kill:
    event: str
    """`metrics`, `saving` or `start` (see the module docstring)."""
    step: int
    """The next step the run had to do when it was started (for `metrics` and `saving`: the step whose
    metrics line or checkpoint write triggers the kill); set by `run_and_kill`."""
    delay_s: float
    """Wait after the trigger before SIGKILL."""
    landed: str = ""
    """What the run's files showed when it was killed."""


def kill_plan(seed: int, kills: int) -> list[Kill]:
    """Seeded kill points: the event and the delay after it (the step is the next one the run has to do)."""
    rng = random.Random(seed)
    plan = []
    for _ in range(kills):
        event = rng.choice(["metrics", "metrics", "saving", "start"])
        # A step takes ~0.1-0.3 s here: a metrics-triggered kill lands in the checkpoint write or a later step.
        delay = {"metrics": rng.uniform(0.0, 0.15), "saving": 0.0, "start": rng.uniform(1.0, 5.0)}[event]
        plan.append(Kill(event, 0, delay))
    return plan


def run_and_kill(out_dir: Path, kill: Kill, steps: int = STEPS, timeout_s: float = RUN_TIMEOUT_S, dtype: str = "float32") -> bool:
    """Start the run, SIGKILL it at `kill`; True when the kill landed before the run finished."""
    done = max(checkpoint_steps(out_dir), default=0)
    target = min(done + 1, steps)  # the next step this process has to do
    stale = temp_folders(out_dir)
    since = time.time_ns()
    proc = start_run(out_dir, steps, dtype)
    started = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - started < timeout_s:
            if kill.event == "start" and time.monotonic() - started >= kill.delay_s:
                break
            if kill.event == "metrics" and last_logged_step(out_dir, since) == target:
                time.sleep(kill.delay_s)
                break
            if kill.event == "saving" and temp_folders(out_dir) - stale and (last_logged_step(out_dir, since) or 0) >= target:
                break
            time.sleep(0.002)
        alive = proc.poll() is None
        if alive:
            proc.kill()  # SIGKILL, to the process this test started
        proc.wait(30)
    finally:
        proc.log.close()  # type: ignore[attr-defined]
    kill.step = target
    kill.landed = (f"after the kill: checkpoints {checkpoint_steps(out_dir)}, metrics lines {metric_steps(out_dir)}, "
                   f"temporary folders {len(temp_folders(out_dir))}")
    return alive


# -- comparison --------------------------------------------------------------------------------------------


def metrics_rows(out_dir: Path) -> list[dict]:
    """Every metrics line without its wall-clock timings and rates and its memory peak, which differ from run to run."""
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(("time/", "perf/"))} for row in rows]


def final_state(out_dir: Path, steps: int = STEPS) -> dict:
    import torch
    from safetensors.torch import load_file

    last = out_dir / "checkpoints" / f"step-{steps:06d}"
    return {"weights": load_file(str(last / "policy.safetensors")), "reference": load_file(str(last / "reference.safetensors")),
            "optim": torch.load(last / "policy.optim.pt", weights_only=True)}


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a.detach(), b.detach())


def assert_same_state(a, b, where: str = "") -> None:
    import torch

    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), f"tensors differ at {where}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"keys differ at {where}"
        for k in a:
            assert_same_state(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"lengths differ at {where}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{a!r} != {b!r} at {where}"


def killed_run_matches(tmp: Path, seed: int, kills: int, steps: int = STEPS, dtype: str = "float32") -> tuple[list[Kill], list[bool]]:
    """An uninterrupted run (in the background) and a run killed at `kill_plan(seed, kills)` then resumed to
    the end, both computing in `dtype`; asserts they agree. Returns the kills and whether each landed before
    its run finished."""
    straight_dir, killed_dir = tmp / "straight", tmp / "killed"
    straight = start_run(straight_dir, steps, dtype)
    plan = kill_plan(seed, kills)
    landed = [run_and_kill(killed_dir, kill, steps, dtype=dtype) for kill in plan]
    finish_run(start_run(killed_dir, steps, dtype), killed_dir)
    finish_run(straight, straight_dir)

    assert not temp_folders(killed_dir), "a temporary checkpoint folder was left behind"
    assert checkpoint_steps(killed_dir) == checkpoint_steps(straight_dir) == [steps - 1, steps]
    expected, got = metrics_rows(straight_dir), metrics_rows(killed_dir)
    assert [r["step"] for r in expected] == list(range(steps + 1))  # the cold start's line, then one per step
    assert got == expected
    assert_same_state(final_state(killed_dir, steps), final_state(straight_dir, steps))
    return plan, landed


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sigkilled_training_resumes_to_the_same_metrics_and_weights(tmp_path, dtype):
    """Exact at either precision: a bfloat16 run's sampler copy is rebuilt from the restored weights."""
    plan, landed = killed_run_matches(tmp_path, seed=0, kills=3, dtype=dtype)
    assert all(landed), f"a kill came after its run had finished: {plan}"
    for kill in plan:
        print(f"SIGKILL at {kill.event} (step {kill.step}, +{kill.delay_s:.2f} s); {kill.landed}")
    print(f"{len(plan)} kills, resumed to the end: metrics and final weights and optimizer state equal the uninterrupted run's")
    # What the comparison rests on: the cold start moved the weights from the model as built, and the KL's
    # reference is the cold-started policy (a reference restored from the built model would pull them back);
    # a bfloat16 run keeps the reference's linear weights as the bfloat16 it computes with.
    from agents.train.setup import load_model

    built = dict(load_model("tiny", seed=0)[0].named_parameters())
    final = final_state(tmp_path / "straight")
    assert any(not torch_equal(built[n], w) for n, w in final["weights"].items())
    reference = final["reference"]
    assert all(torch_equal(reference[n], w.to(reference[n].dtype)) for n, w in final["weights"].items())
    assert (dtype == "bfloat16") == any(reference[n].dtype != w.dtype for n, w in final["weights"].items())


def main() -> int:
    parser = argparse.ArgumentParser(description="Kill a training run at seeded points; check the resumed run.")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: 2 * kills + 2, so kills keep landing)")
    parser.add_argument("--out", default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the runs' precision (--dtype)")
    args = parser.parse_args()
    import tempfile

    steps = args.steps or 2 * args.kills + 2
    with tempfile.TemporaryDirectory(prefix="kill-resume-") as tmp:
        work = Path(args.out or tmp)
        started = time.perf_counter()
        try:
            plan, landed = killed_run_matches(work, args.seed, args.kills, steps, args.dtype)
            survived = True
        except AssertionError as e:
            print(f"FAILED: {e}")
            return 1
        for i, (kill, hit) in enumerate(zip(plan, landed)):
            print(f"kill {i + 1}: {kill.event} step {kill.step} +{kill.delay_s:.2f}s -> {'killed' if hit else 'run had finished'}; {kill.landed}")
        print(json.dumps({"kills_tried": len(plan), "kills_landed": sum(landed), "survived": survived,
                          "steps": steps, "seconds": round(time.perf_counter() - started, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
