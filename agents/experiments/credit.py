"""The main job's credit view: what each learner makes of one shared batch of rollouts.

The learners of the main job differ in how they turn rollouts into learning signal, and a 2-step run cannot
show that through test EM. The credit view shows it without noise, on one batch:

1. The batch: `Preset.credit_questions` questions x `Preset.credit_group` rollouts, sampled once (seeded, at
   the preset's temperature) by the cold-started policy every learner starts from, from the first questions
   of the seed's training order (those the RL steps train on), in the env the learners train in, which also
   writes what each of them reads: the judge's labels (CW-GRPO) and exact gold-entity matches (E-GRPO).
2. Each learner's registered batch function (`get_learner(name).batch`, what the trainer calls on every
   step) turns the batch into per-token advantages; each round's advantage is read off them at the round's
   token span (`round_values`).
3. COSEARCH's ranker changes which documents the agent sees, so its calls cannot be made on a batch the
   other learners share, and its 10-step cold start alone takes minutes. The view shows instead the calls of
   COSEARCH's own last RL step, as its update scored them (`cosearch.rank_batch`, through
   `SecondModel.last_step`); the runner adds them under `ranker`.

Nothing is trained. `credit_view` is the computation (JSON-able), `sample_credit_view` the job the runner
runs beside the learners (`agents.experiments.runner`), `agents.experiments.credit_report` the table and
`agents.experiments.credit_plot` the figure (`credit.png`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from agents.learners.batch import Trajectory
from agents.learners.e_grpo import entity_rate
from agents.learners.grpo import GRPOConfig, outcome_reward
from agents.learners.registry import get_learner
from searchgym.errors import BatchError, ConfigError
from searchgym.info import StepInfo, TurnLabels

VIEW_LEARNERS = ("grpo", "cw-grpo", "e-grpo", "cosearch", "gspo", "dr-grpo")
"""The learners the view shows: the four reference learners, then GSPO and Dr.GRPO (GRPO's advantages; GSPO
changes the loss, Dr.GRPO drops the division by the group's std)."""

CUT = "cut"
"""The action of a rollout's last round when the env never saw it (cut off at the token budget)."""


def round_values(advantages: torch.Tensor, spans: Sequence[tuple[int, int]]) -> list[float | None]:
    """Each round's advantage, read off a trajectory's per-token advantages (T,) at its rounds' token spans:
    the mean over the span (every learner here gives a round's tokens one value); None for an empty span.

    >>> round_values(torch.tensor([0.0, 2.0, 2.0, 0.0, 1.0]), [(1, 3), (4, 5), (5, 5)])
    [2.0, 1.0, None]
    """
    out: list[float | None] = []
    for start, end in spans:
        if not 0 <= start <= end <= len(advantages):
            raise BatchError(f"round span ({start}, {end}) lies outside the trajectory's {len(advantages)} advantages")
        out.append(float(advantages[start:end].mean()) if end > start else None)
    return out


def turn_labels(infos: Sequence[StepInfo]) -> list[TurnLabels | None]:
    """Each step's judge labels, from the episode summary when it holds every turn's (a deferred judge fills
    them only there), else from the steps, as CW-GRPO reads them (`cw_grpo.round_contributions`)."""
    episode = infos[-1].get("episode") if infos else None
    if episode is not None and len(episode.get("turn_labels", ())) == len(infos):
        return list(episode["turn_labels"])
    return [info.get("labels") for info in infos]


def rollout_row(t: Trajectory) -> dict[str, Any]:
    """What the env said about one rollout: its outcome, entity match rate and every round's action and labels."""
    infos = t.step_infos
    episode = (infos[-1].get("episode") or {}) if infos else {}
    rounds = []
    for info, labels in zip(infos, turn_labels(infos)):
        labels = labels or {}
        rounds.append({"action": str(info.get("action")), "u": labels.get("retrieval_utility"),
                       "v": labels.get("reasoning_correctness"), "p": labels.get("contribution")})
    rounds += [{"action": CUT, "u": None, "v": None, "p": None}] * (len(t.rounds) - len(infos))
    return {
        "group": int(t.group), "sample": int(getattr(t, "sample", 0)), "question": getattr(t, "question", None),
        "question_id": getattr(t, "question_id", None), "hops": (getattr(t, "reset_info", None) or {}).get("hops"),
        "gold": list(t.gold_answers or []), "finish": t.finish_reason,
        "em": outcome_reward(infos, "em") if infos else 0.0, "f1": outcome_reward(infos, "f1") if infos else 0.0,
        "format_valid": bool(episode.get("format_valid", False)), "entity_rate": entity_rate(infos), "rounds": rounds,
    }


def learner_column(name: str, config: GRPOConfig, trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Learner `name`'s targets for the batch, through its registered batch function: each rollout's reward,
    whether it is in the loss, and each round's advantage; plus the batch's learner metrics."""
    spec = get_learner(name)
    if type(config) is not spec.config:
        raise ConfigError(f"the credit view's config for {name!r} is a {type(config).__name__}, not its {spec.config.__name__}")
    batch = spec.batch(trajectories, config)
    return {"reward": [float(r) for r in batch.rewards], "include": [bool(i) for i in batch.include],
            "rounds": [round_values(a, t.rounds) for a, t in zip(batch.advantages, trajectories)],
            "metrics": {k: float(v) for k, v in batch.metrics.items()}}


def credit_view(trajectories: Sequence[Trajectory], configs: Mapping[str, GRPOConfig]) -> dict[str, Any]:
    """The view of one batch (trajectories in group-major order): `rollouts` (one `rollout_row` each) and
    `learners` (one `learner_column` per entry of `configs`, by name)."""
    if not trajectories:
        raise BatchError("the credit view needs at least one rollout")
    return {"rollouts": [rollout_row(t) for t in trajectories],
            "learners": {name: learner_column(name, c, trajectories) for name, c in configs.items()}}


def view_configs(learner_options: Mapping[str, Mapping[str, Any]], names: Sequence[str] = VIEW_LEARNERS) -> dict[str, GRPOConfig]:
    """Each view learner's config, with the run's options for it (`Preset.learner_options`)."""
    return {name: get_learner(name).config(**learner_options.get(name, {})) for name in names}


def view_env_options(configs: Mapping[str, GRPOConfig], judge: str | None) -> dict[str, Any]:
    """The env options every view learner asks for (`EnvNeeds`: E-GRPO's entity matching, the run's `judge`
    for learners that read labels), merged; a `ConfigError` when two learners ask for different values of
    one option, since one batch cannot serve both. A second model's options (COSEARCH's ranker) are left out:
    they change what the agent sees."""
    merged: dict[str, Any] = {}
    for name, config in configs.items():
        needs = get_learner(name).needs
        options = needs.options(config)
        if needs.judge and judge is not None:
            options["judge"] = judge
        for key, value in options.items():
            if key in merged and merged[key] != value:
                raise ConfigError(f"the credit view's learners ask for two values of the env option {key!r} ({merged[key]!r} and "
                                  f"{value!r}, the second by {name}): one batch cannot serve both; change that learner's option")
            merged[key] = value
    return merged


def sample_credit_view(config, configs: Mapping[str, GRPOConfig], rl_steps: int, rl_questions: int) -> dict[str, Any]:
    """The view job: a trainer built by `config` (a `credit_config`), one seeded batch of its
    `questions_per_step` x `rollout.group_size` rollouts from the first questions of the training order, and
    `credit_view` of it with `configs`. Also records the hop counts of the questions each of the learners'
    `rl_steps` steps of `rl_questions` questions trains on (`training_steps`): the same seed draws the same
    questions for every learner."""
    from agents.experiments.progress import counting_passes, generation_budget, phase
    from agents.train.trainer import Trainer

    with phase("[credit view] loading the start policy and building the env"):
        trainer = Trainer(config)
    try:
        records = trainer.env.unwrapped.records
        steps = [[records[i].hops for i in trainer.questions(rl_questions)] for _ in range(rl_steps)]
        trainer.position = 0  # the view's questions are the first of the same order
        c = config.rollout
        budget = generation_budget(config.questions_per_step * c.group_size, config.env.max_turns, c.max_turn_tokens, c.max_batch_rows)
        local = trainer.model if c.backend == "hf" else None  # what samples in this process (nothing to count with SGLang)
        with phase(f"[credit view] {config.questions_per_step} x {c.group_size} rollouts (model passes, at most)", budget, "pass") as bar, \
                counting_passes(local, bar):
            trajectories = trainer.rollout_share(trainer.questions(config.questions_per_step), 0)
        view = credit_view(trajectories, configs)
    finally:
        trainer.close()
    view["training_steps"] = [{"step": k + 1, "hops": hops} for k, hops in enumerate(steps)]
    view["batch"] = {"questions": config.questions_per_step, "group": config.rollout.group_size,
                     "temperature": config.rollout.temperature, "seed": config.seed}
    return view


def credit_config(config, questions: int, group: int, configs: Mapping[str, GRPOConfig]):
    """The view job's `TrainConfig` from GRPO's (`config`, from the start policy): `questions` x `group`
    rollouts, the view's env options under the run's own (which win, as in training), no checkpoints. GRPO's
    trainer loads one model and no KL reference; its learner config changes nothing the view computes."""
    options = {**view_env_options(configs, config.env.judge), **config.env.options}
    return replace(config, questions_per_step=questions, resume=False, checkpoint_every=0, env=replace(config.env, options=options),
                   rollout=replace(config.rollout, group_size=group))


def credit_result(config, configs: Mapping[str, GRPOConfig], rl_steps: int, rl_questions: int, resume: bool = False) -> dict[str, Any]:
    """`sample_credit_view`, announced. With `resume`, a view an earlier run of the same setting finished
    (`credit.json` beside its `setting.json`) is read back instead."""
    from agents.experiments.resume import check_same_setting, run_setting, write_json

    run_dir = Path(config.out_dir)
    what = "[credit view]"
    print(f"\n{what} {config.questions_per_step} questions x {config.rollout.group_size} rollouts from the start policy; every "
          "learner's advantages on them", flush=True)
    if resume:
        check_same_setting(run_dir / "setting.json", run_setting(config), "credit view")
        if (run_dir / "credit.json").is_file():
            print(f"{what} resumed: made by an earlier run ({run_dir / 'credit.json'})", flush=True)
            return json.loads((run_dir / "credit.json").read_text())
        write_json(run_dir / "setting.json", run_setting(config))
    view = sample_credit_view(config, configs, rl_steps, rl_questions)
    if resume:
        write_json(run_dir / "credit.json", view)
    return view
