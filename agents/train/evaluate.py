"""Evaluation of the policy during training (before the first and after the last step): greedy EM/F1, and
optionally Avg@k, the mean EM of k sampled rollouts per question, as CW-GRPO reports."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import gymnasium as gym
import numpy as np

from agents.rollout import RolloutConfig, RolloutEngine
from agents.train.metrics import contributing_searches, episode_summaries
from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)


@dataclass
class Evaluation:
    """One evaluation: its metrics and the greedy EM of each question (for paired comparisons)."""

    metrics: dict[str, float]
    """`eval/em`, `eval/f1`, `eval/searches`, `eval/questions`, `eval/contributing_searches` (when judged), and with samples `eval/avg@k/em`, `eval/avg@k/f1`,
    `eval/avg@k/searches`; with a model ranker in the env, its greedy episodes' `ranker_eval_metrics`."""
    em: list[float]
    """Greedy EM per question, in question order."""
    avg_em: list[float] | None = None
    """With samples: the mean EM of each question's k samples, in question order (their mean is Avg@k)."""
    searches: list[float] | None = None
    """Greedy searches per question, in question order (for paired comparisons of tool calls)."""
    contributing: list[float] | None = None
    """Of those, the search rounds the env's judge labelled as contributing (CW-GRPO's p_t = 1), per question;
    None when an episode searched without judge labels (an env made with `judge=None`)."""


def _rollouts(policy, make_env, engine_config: RolloutConfig, n: int, group: int, temperature: float, seed: int | None):
    engine = RolloutEngine(policy, make_env, replace(engine_config, group_size=group, temperature=temperature, seed=seed))
    try:
        return engine.rollout([{"options": {"index": i}} for i in range(n)])
    finally:
        engine.close()


def ranker_eval_metrics(trajectories, corpus=None) -> dict[str, float]:
    """What a model ranker in the env (COSEARCH's) did in these episodes: over its calls whose candidates hold a
    gold answer (`eval/ranker_answerable_calls`), the Hit@1 of the order it showed (`eval/ranker_hit@1`) against
    the retriever's order (`eval/retriever_hit@1`); over all its calls, the share whose output parsed
    (`eval/ranker_valid_rate`) and, of those, the share that kept the retriever's order
    (`eval/ranker_kept_order_rate`). {} when no step called one, or when the calls' candidate texts are neither
    recorded nor in `corpus` (a warning says so)."""
    from agents.learners.cosearch import corpus_texts
    from agents.learners.cosearch_calls import calls_from_trajectory, kept_order_rate, ranking_hits
    from searchgym.errors import BatchError

    texts = corpus_texts(corpus)
    calls, golds = [], []
    try:
        for i, t in enumerate(trajectories):
            for call in calls_from_trajectory(t.step_infos or [], texts=texts, trajectory=i):
                calls.append(call)
                golds.append(t.gold_answers or [])
    except BatchError as e:
        logger.warning("the evaluation's ranker calls are not scored: %s", e)
        return {}
    if not calls:
        return {}
    hits = ranking_hits(calls, golds, ks=(1,))
    out = {"eval/ranker_answerable_calls": hits["ranker/answerable_calls"], "eval/ranker_valid_rate": sum(c.valid for c in calls) / len(calls)}
    if (kept := kept_order_rate(calls)) is not None:
        out["eval/ranker_kept_order_rate"] = kept
    if "ranker/hit@1" in hits:
        out.update({"eval/ranker_hit@1": hits["ranker/hit@1"], "eval/retriever_hit@1": hits["ranker/retriever_hit@1"]})
    return out


def eval_metrics(summaries: list[dict]) -> dict[str, float]:
    """EM, F1 and searches per episode over episode summaries (`info["episode"]`; {} for an episode without one),
    one per question: the evaluation's metrics whoever ran the episodes."""
    return {
        "eval/em": float(np.mean([s.get("em", 0.0) for s in summaries])),
        "eval/f1": float(np.mean([s.get("f1", 0.0) for s in summaries])),
        "eval/searches": float(np.mean([s.get("searches", 0) for s in summaries])),
        "eval/questions": float(len(summaries)),
    }


def evaluate_policy(policy, make_env: Callable[[], gym.Env], engine_config: RolloutConfig, count: int, *,
                    samples: int = 0, temperature: float = 1.0, seed: int = 0) -> Evaluation:
    """One greedy rollout of each of the env's first `count` questions; with `samples` = k >= 2 also k
    rollouts per question at `temperature` (seeded by `seed`), whose mean EM and F1 are Avg@k."""
    if samples == 1 or samples < 0:
        raise ConfigError(f"samples must be 0 (greedy only) or >= 2 (Avg@k), got {samples}")
    env = make_env().unwrapped
    n = min(count, len(env.records))
    greedy = _rollouts(policy, make_env, engine_config, n, 1, 0.0, None)
    sampled = _rollouts(policy, make_env, engine_config, n, samples, temperature, seed) if samples >= 2 else []
    evaluation = evaluation_of(episode_summaries(greedy), episode_summaries(sampled), samples)
    evaluation.metrics.update(ranker_eval_metrics(greedy, getattr(env, "corpus", None)))
    return evaluation


def evaluation_of(greedy: list[dict], sampled: list[dict], samples: int = 0) -> Evaluation:
    """The evaluation of one greedy episode summary per question and, with `samples` = k >= 2, k sampled
    ones per question (group-major), whoever ran the episodes."""
    metrics = eval_metrics(greedy)
    if samples >= 2:
        metrics.update(sampled_metrics(sampled, samples))
    contributing = [contributing_searches(s) for s in greedy]
    if contributing and None not in contributing:
        metrics["eval/contributing_searches"] = float(np.mean(contributing))
    return Evaluation(metrics, [float(s.get("em", 0.0)) for s in greedy], per_question_em(sampled, samples) if samples >= 2 else None,
                      [float(s.get("searches", 0)) for s in greedy],
                      [float(c) for c in contributing] if contributing and None not in contributing else None)


def sampled_metrics(summaries: list[dict], samples: int) -> dict[str, float]:
    """Avg@k EM and F1, and searches per sampled episode, over the episode summaries of k samples per question."""
    return {f"eval/avg@{samples}/em": float(np.mean([s.get("em", 0.0) for s in summaries])),
            f"eval/avg@{samples}/f1": float(np.mean([s.get("f1", 0.0) for s in summaries])),
            f"eval/avg@{samples}/searches": float(np.mean([s.get("searches", 0) for s in summaries]))}


def per_question_em(summaries: list[dict], samples: int) -> list[float]:
    """Each question's mean EM over its k samples, from group-major episode summaries (k per question)."""
    em = np.array([s.get("em", 0.0) for s in summaries], dtype=float)
    if len(em) % samples:
        raise ValueError(f"{len(em)} episodes are not {samples} samples per question")
    return em.reshape(-1, samples).mean(axis=1).tolist()


def greedy_eval(policy, make_env: Callable[[], gym.Env], engine_config: RolloutConfig, count: int) -> dict[str, float]:
    """EM, F1 and searches per episode of one greedy rollout of each of the env's first `count` questions."""
    return evaluate_policy(policy, make_env, engine_config, count).metrics
