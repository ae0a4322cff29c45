"""Step infos built by hand in the shape of `searchgym.info` (only the keys the learners read)."""

from __future__ import annotations

from typing import Any


def labels(p: int | None, *, failed: bool = False, pending: bool = False) -> dict[str, Any]:
    """TurnLabels with u = v = p (None for non-search turns and pending labels)."""
    return {
        "retrieval_utility": p,
        "reasoning_correctness": p,
        "contribution": p,
        "judge": "test",
        "deferred": pending,
        "pending": pending,
        "failed": failed,
        "analysis": None,
        "error": "timeout" if failed else None,
    }


def step(
    turn: int, action: str, *, lab: dict | None = None, rate: float | None = None, ranker: dict | None = None, **reward
) -> dict[str, Any]:
    return {
        "turn": turn,
        "action": action,
        "invalid_action": action == "invalid",
        "labels": lab,
        "entities": None if rate is None else {"rate": rate},
        "ranker": ranker,
        "reward": dict(reward),
    }


def trajectory(
    actions: list[str],
    p: list[int | None] | None = None,
    *,
    em: float = 0.0,
    f1: float = 0.0,
    rate: float | None = None,
    format_valid: bool | None = None,
    episode_labels: list[dict | None] | None = None,
) -> list[dict[str, Any]]:
    """A whole episode: one step per action, the last carrying the episode summary."""
    p = p or [None] * len(actions)
    infos = [
        step(t, a, lab=None if v is None and a == "answer" else labels(v)) for t, (a, v) in enumerate(zip(actions, p))
    ]
    answered = actions[-1] == "answer"
    if answered:
        infos[-1]["reward"] = {"answer": em, "em": em, "f1": f1, "cover_em": em, "total": em}
    infos[-1]["entities"] = None if rate is None else {"rate": rate}
    infos[-1]["episode"] = {
        "outcome": "answered" if answered else "out_of_turns",
        "turns": len(actions),
        "em": em,
        "f1": f1,
        "cover_em": em,
        "format_valid": answered if format_valid is None else format_valid,
        "turn_labels": episode_labels if episode_labels is not None else [i["labels"] for i in infos],
        "judge_failures": 0,
        "entity_rate": rate,
    }
    return infos
