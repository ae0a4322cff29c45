"""Reading back what an earlier run of the same command finished (`--resume`): each run's setting, kept
beside it, decides whether its results and checkpoints may be reused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agents.train import TrainConfig
from searchgym.errors import ConfigError


def write_json(path: Path, value) -> None:
    """`path` holds all of `value` or what it held before: a run killed mid-write leaves no half file to resume from."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


RESUME_FREE = ("threads", "resume", "checkpoint_every", "optim.micro_batch", "optim.gradient_checkpointing", "optim.park_idle",
               "huge_pages", "malloc_mmap_threshold")
"""`TrainConfig` fields a resumed learner may change: how many threads compute it, whether it checkpoints and
how its update holds its memory do not change what it learns (micro-batch and checkpointing change float
rounding, so a resume is bit-exact only with the same ones; idle tensors in files, huge pages and glibc's mmap
threshold change nothing)."""


RL_ONLY = ("steps", "questions_per_step", "learner", "learner_name", "optim.lr", "optim.warmup_steps", "rollout.group_size")
"""Fields of the cold start's `TrainConfig` that only its RL steps would read: a start policy is reused by
`--resume` whatever they are."""


MACHINE_RESOLVED = ("precision",)
"""What a run's setting resolves to on the machine that runs it: `dtype="auto"` computes in bfloat16 on a CPU
with native bfloat16 and in float32 elsewhere, so a run resumed on another machine would go on at another
precision under the same config. Setting files written before these were recorded are not checked on them."""


def run_setting(config: TrainConfig, leave_out: tuple[str, ...] = ()) -> dict:
    """What a run's result depends on: its config, flattened (`optim.lr`), without `RESUME_FREE` and `leave_out`,
    and the precision it computes in on this machine (`precision`)."""
    from agents.experiments.fingerprint import flatten
    from agents.precision import compute_dtype, dtype_name
    from agents.train.setup import jsonable_config

    dropped = RESUME_FREE + leave_out
    setting = {k: v for k, v in flatten(jsonable_config(config)).items() if not any(k == d or k.startswith(d + ".") for d in dropped)}
    return {**setting, "precision": dtype_name(compute_dtype(config.dtype, config.device))}


def check_same_setting(path: Path, setting: dict, learner: str) -> None:
    """Refuse to resume a run whose earlier run (its `setting.json`) had another setting. A field the earlier
    run's version did not have yet is the same setting when it is at its default now (the behaviour that
    version had); a field that version recorded and that is `RESUME_FREE` now is left aside. Where the earlier
    run recorded its `precision`, that is compared instead of `dtype` (`auto` then `float32` on a CPU without
    native bfloat16 is the same run; `auto` on one with and one without is not)."""
    if not path.is_file():
        return
    before, now = {k: v for k, v in json.loads(path.read_text()).items() if k not in RESUME_FREE}, setting
    if "precision" in before:
        before, now = ({k: v for k, v in d.items() if k != "dtype"} for d in (before, now))
    defaults = run_setting(TrainConfig())
    differ = sorted(k for k in {**before, **now} if before.get(k) != now.get(k)
                    and not (k not in before and (k in MACHINE_RESOLVED or k in defaults and now.get(k) == defaults[k])))
    if differ:
        hint = (f" (it computed in {before['precision']}, this run would compute in {now['precision']}: --dtype {before['precision']} "
                "resumes it at its own precision)" if "precision" in differ else "")
        raise ConfigError(f"[{learner}] --resume found an earlier run in {path.parent} with another setting ({', '.join(differ)} differ){hint}: "
                          "give another --out, or delete that folder to start it again")


def logged_history(path: Path) -> list[dict[str, float]]:
    """The RL steps' lines of a run's `metrics.jsonl` (step 0, the cold start's line, left out): what
    `Trainer.run` returns for a run from step 0 to its end."""
    return [m for m in map(json.loads, path.read_text().splitlines()) if m.get("step", 0) >= 1]


