"""TRL's `GRPOTrainer` trained on multi-turn searchgym episodes (`agents.integrations.trl`).

Each optimizer step samples `--questions-per-step` questions of the env, `--group-size` episodes each,
through `SearchQARollout` (the agent searches and answers over several turns; retrieved documents are
masked out of the loss), scores them with searchgym's rewards, and lets TRL do one GRPO update
(DAPO loss, clip-higher 0.2/0.28, no KL: TRL's defaults plus `epsilon_high`). Every step prints the mean
env reward (EM of the final answer), F1, format validity, turns and searches per episode, how episodes
ended and the loss, and appends them to `--out`/metrics.jsonl.

    python -m agents.experiments.trl_grpo --model smollm2-135m --env SearchQA-Synthetic-v0 --steps 10
    python -m agents.experiments.trl_grpo --model tiny --steps 2   # a random 2-layer model: a smoke run
    python -m agents.experiments.trl_grpo --steps 2 --questions-per-step 2 --max-turn-tokens 48 \
        --max-completion-length 192 --short-prompt --env-args top_k=1   # sized for a 2-core CPU

Needs `pip install "searchgym[agents,trl]"`. The synthetic env defaults to 1-hop questions here
with `--questions` of them (`--env-args hops=[1,2]` to change it); other ids take their options the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

import searchgym  # noqa: F401  (registers the ids)
from searchgym.errors import ConfigError

PRINTED = {
    "reward": "rewards/env_reward/mean",
    "f1": "rewards/searchgym_f1/mean",
    "format": "rewards/format_reward/mean",
    "turns": "rollout/turns_mean",
    "searches": "rollout/searches_mean",
    "answered": "rollout/end/answered",
    "over_long": "rollout/end/over_long",
    "loss": "loss",
}
"""Columns of the per-step line: short name -> TRL log key."""


@dataclass
class Args:
    """Run settings (each is also a command-line option)."""

    model: str = "smollm2-135m"
    """`smollm2-135m` (offline), `tiny` (a random 2-layer model, for a smoke run), a local folder or a hub id."""
    env: str = "SearchQA-Synthetic-v0"
    """A registered searchgym env id."""
    env_args: tuple[str, ...] = ()
    """KEY=VALUE options for gym.make, values in JSON (e.g. hops=[1,2] num_entities=500)."""
    steps: int = 10
    """Optimizer steps (one generation round each)."""
    questions: int = 200
    """Questions in the training dataset (the env's first ones)."""
    questions_per_step: int = 4
    group_size: int = 4
    """Episodes per question (TRL's num_generations)."""
    max_turn_tokens: int = 96
    """Tokens the policy may write in one turn."""
    max_completion_length: int = 1024
    """Tokens after the prompt in one episode (agent turns and observations)."""
    learning_rate: float = 1e-6
    temperature: float = 1.0
    epsilon_high: float = 0.28
    """Upper clip of the ratio (DAPO's clip-higher; the lower one is TRL's 0.2)."""
    short_prompt: bool = False
    """Use the learner comparison's short instruction (same tags, a third of the tokens) instead of Search-R1's:
    on a CPU, prompt tokens dominate the step."""
    mask_truncated_completions: bool = False
    """Leave over-long episodes out of the loss (they still count in the group's reward statistics)."""
    seed: int = 0
    threads: int | None = None
    """torch intra-op threads (None: torch's default). On a CPU shared with other jobs, 1 avoids OpenMP
    spin-waiting."""
    out: str = "results/trl_grpo"

    def __post_init__(self) -> None:
        for name in ("steps", "questions", "questions_per_step", "max_turn_tokens", "max_completion_length"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError(f"--group-size must be >= 2 (GRPO compares episodes of one question), got {self.group_size}")

    def env_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for pair in self.env_args:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ConfigError(f"--env-args takes KEY=VALUE pairs, got {pair!r}")
            try:
                kwargs[key] = json.loads(value)
            except json.JSONDecodeError:
                kwargs[key] = value
        if self.env == "SearchQA-Synthetic-v0":
            kwargs.setdefault("hops", [1])
            kwargs.setdefault("num_questions", self.questions)
        if self.short_prompt:
            from agents.experiments.presets import SHORT_TEMPLATE

            kwargs.setdefault("template", SHORT_TEMPLATE)
        return kwargs


def load_model(name: str, seed: int):
    from agents.models import TinyModelConfig, build_tiny_model, load_model_and_tokenizer

    if name == "tiny":
        return build_tiny_model(TinyModelConfig(seed=seed))
    return load_model_and_tokenizer(name, dtype="float32")


def grpo_config(args: Args):
    import torch
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers renaming its own arguments
        return GRPOConfig(
            output_dir=str(Path(args.out) / "trainer"),
            per_device_train_batch_size=args.questions_per_step * args.group_size,
            num_generations=args.group_size,
            max_completion_length=args.max_completion_length,
            max_steps=args.steps,
            learning_rate=args.learning_rate,
            temperature=args.temperature,
            epsilon_high=args.epsilon_high,
            mask_truncated_completions=args.mask_truncated_completions,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            disable_tqdm=True,  # one printed line per step instead
            use_cpu=not cuda,
            bf16=cuda and torch.cuda.is_bf16_supported(),
            seed=args.seed,
        )


def run(args: Args) -> list[dict[str, float]]:
    """Train and return TRL's per-step logs."""
    import torch
    from transformers import PrinterCallback, TrainerCallback

    from agents.integrations.trl import (
        SearchQARollout,
        TRLRolloutConfig,
        answer_reward,
        env_reward,
        format_reward,
        make_grpo_trainer,
    )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kwargs = args.env_kwargs()
    if args.threads:
        torch.set_num_threads(args.threads)

    def make_env() -> gym.Env:
        return gym.make(args.env, **kwargs)

    model, tokenizer = load_model(args.model, args.seed)
    history: list[dict[str, float]] = []
    metrics_file = (out / "metrics.jsonl").open("w")
    start = time.perf_counter()

    class PrintSteps(TrainerCallback):
        def on_log(self, trainer_args, state, control, logs=None, **kw):
            if not logs or "rewards/env_reward/mean" not in logs:
                return
            row = {"step": state.global_step, "seconds": round(time.perf_counter() - start, 1),
                   "rollout_seconds": round(rollout.seconds, 1), **logs}
            history.append(row)
            metrics_file.write(json.dumps(row) + "\n")
            metrics_file.flush()
            cells = " ".join(f"{name} {logs.get(key, float('nan')):.3f}" for name, key in PRINTED.items())
            print(f"step {state.global_step:4d}  {cells}  ({row['seconds']:.0f} s; rollout {rollout.seconds:.0f} s)", flush=True)

    rollout = SearchQARollout(make_env, TRLRolloutConfig(max_turn_tokens=args.max_turn_tokens))
    trainer = make_grpo_trainer(model, tokenizer, make_env, grpo_config(args), rollout=rollout, limit=args.questions,
                                reward_funcs=[env_reward, answer_reward("f1"), format_reward], callbacks=[PrintSteps()])
    trainer.remove_callback(PrinterCallback)  # it would print every raw log dict next to our lines
    shown = {k: ("<short>" if k == "template" else v) for k, v in kwargs.items()}
    print(f"{args.model} on {args.env} {shown}: {len(trainer.train_dataset)} questions, "
          f"{args.questions_per_step} x {args.group_size} episodes per step, {args.steps} steps; torch threads "
          f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        trainer.train()
    finally:
        metrics_file.close()
        rollout.close()
    (out / "args.json").write_text(json.dumps(asdict(args), indent=2))
    return history


def main(argv: list[str] | None = None) -> int:
    from agents.cli.dataclass_args import add_dataclass_arguments, dataclass_from_args

    parser = argparse.ArgumentParser(description="train a policy with TRL's GRPOTrainer on searchgym episodes")
    add_dataclass_arguments(parser, Args)
    args = dataclass_from_args(Args, parser.parse_args(argv))
    history = run(args)
    if history:
        first, last = history[0], history[-1]
        print(f"env reward: step {first['step']} {first['rewards/env_reward/mean']:.3f} -> step {last['step']} "
              f"{last['rewards/env_reward/mean']:.3f}; metrics in {Path(args.out) / 'metrics.jsonl'}")
    return 0


if __name__ == "__main__":
    from searchgym.cli.run import run_main

    raise SystemExit(run_main(main))
