"""TRL reward functions over searchgym episodes: each reads the `Trajectory` that `SearchQARollout`
(`agents.integrations.trl`) passes along with every completion, as the `searchgym_trajectory` column."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agents.rollout import Trajectory, credit_metrics, rollout_metrics
from searchgym.errors import BatchError, ConfigError
from searchgym.rewards import format_valid, resolve_answer_reward
from searchgym.rewards.answer import AnswerReward

TRAJECTORY_FIELD = "searchgym_trajectory"
"""The extra rollout field (one `Trajectory` per completion) that TRL passes on to reward functions."""


def _episodes(trajectories: Sequence[Trajectory] | None, question_ids: Sequence[str] | None) -> list[Trajectory]:
    if trajectories is None:
        raise ConfigError(f"searchgym reward functions score episodes from SearchQARollout: pass rollout_func=SearchQARollout(...) (no {TRAJECTORY_FIELD!r} field arrived)")
    episodes = list(trajectories)
    if question_ids is not None:
        for t, qid in zip(episodes, question_ids):
            if t.question_id != str(qid):
                raise BatchError(f"episode of question {t.question_id!r} arrived for dataset row {qid!r}: the rollout and the dataset are out of step")
    return episodes


def final_answer(trajectory: Trajectory) -> str | None:
    """The answer the env scored, or None when the episode did not end with an answer."""
    if trajectory.finish_reason != "answered" or not trajectory.step_infos:
        return None
    return trajectory.step_infos[-1].get("answer")


def env_reward(completions: Sequence[Any], searchgym_trajectory: Sequence[Trajectory] | None = None, question_id: Sequence[str] | None = None,
               log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float]:
    """The env's return of each episode (its `answer_reward` on the final answer; 0 without an answer).
    Also logs the batch's `rollout/*` metrics (turns, searches, invalid actions, how episodes ended) and
    `credit/*` metrics (`agents.rollout.credit_metrics`: the judge's labels, gold-entity match rates)."""
    episodes = _episodes(searchgym_trajectory, question_id)
    if log_metric is not None:
        for name, value in {**rollout_metrics(episodes), **credit_metrics(episodes)}.items():
            log_metric(name, value)
    return [float(t.reward) for t in episodes]


REWARD_PARTS = ("answer", "em", "f1", "cover_em", "subem", "format")
"""The parts of `info["reward"]` a `reward_part` function can read (`searchgym.info.RewardParts`)."""


def reward_part(name: str = "f1") -> Callable[..., list[float]]:
    """A TRL reward function returning one of the env's own reward parts (`info["reward"][name]`) on each
    episode's last step: `em`, `f1`, `cover_em`, `subem` or `answer` as the env scored the final answer,
    `format` as it judged the whole trajectory; 0 where the env did not report it (no answer, an
    over-long episode). Unlike `answer_reward` it needs no gold answers here, so it works with served
    envs too. Its name, which TRL logs as `rewards/<name>/mean`, is `env_<name>`."""
    if name not in REWARD_PARTS:
        raise ConfigError(f"unknown reward part {name!r}; the env reports {list(REWARD_PARTS)}")

    def reward(completions: Sequence[Any], searchgym_trajectory: Sequence[Trajectory] | None = None,
               question_id: Sequence[str] | None = None, **kwargs: Any) -> list[float]:
        return [float(t.step_infos[-1].get("reward", {}).get(name, 0.0)) if t.step_infos else 0.0
                for t in _episodes(searchgym_trajectory, question_id)]

    reward.__name__ = reward.__qualname__ = f"env_{name}"
    return reward


def answer_reward(metric: str | AnswerReward = "f1") -> Callable[..., list[float]]:
    """A TRL reward function scoring each episode's final answer against the gold answers with a
    `searchgym.rewards` metric (`em`, `f1`, `cover_em`, or a function); 0 without an answer. Its name,
    which TRL logs as `rewards/<name>/mean`, is `searchgym_<metric>`."""
    score = resolve_answer_reward(metric)

    def reward(completions: Sequence[Any], searchgym_trajectory: Sequence[Trajectory] | None = None,
               question_id: Sequence[str] | None = None, **kwargs: Any) -> list[float]:
        out = []
        for t in _episodes(searchgym_trajectory, question_id):
            answer = final_answer(t)
            out.append(0.0 if answer is None or not t.gold_answers else float(score(answer, t.gold_answers)))
        return out

    reward.__name__ = reward.__qualname__ = f"searchgym_{metric if isinstance(metric, str) else getattr(metric, '__name__', 'answer')}"
    return reward


def format_reward(completions: Sequence[Any], searchgym_trajectory: Sequence[Trajectory] | None = None, question_id: Sequence[str] | None = None,
                  **kwargs: Any) -> list[float]:
    """1 when every agent turn is well formed and the episode ends with an answer
    (`searchgym.rewards.format_valid` over the turns the env received), else 0."""
    return [float(format_valid(t.agent_texts)) for t in _episodes(searchgym_trajectory, question_id)]
