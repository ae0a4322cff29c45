"""What the adapters share: a pool of idle envs, and an episode's numbers for a trainer's logs.

Frameworks that make an env per episode (SkyRL-gym, verl's agent loop) take one from a pool.

Building a searchgym env loads its questions and corpus and builds (or loads) the retriever's index. A
framework that asks for a new env per trajectory would pay that every episode, so the adapters take envs
from a pool per (id, kwargs) and give them back when the episode ends: at most as many envs as episodes
run at once, each used by one episode at a time. An env's episode depends only on its `reset(seed=...,
options=...)`, never on what it ran before, so which pooled env plays an episode changes nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

import searchgym  # noqa: F401 - registers the ids


class EnvPool:
    """Envs of `gym.make(env_id, **env_kwargs)`, handed out one episode at a time; safe across threads."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]):
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs)
        self._idle: list[gym.Env] = []
        self._lock = threading.Lock()
        self.made = 0
        """How many envs this pool has built (the most episodes that ran at once)."""

    def acquire(self) -> gym.Env:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.made += 1
        return gym.make(self.env_id, **self.env_kwargs)

    def release(self, env: gym.Env) -> None:
        with self._lock:
            self._idle.append(env)


_POOLS: dict[str, EnvPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(env_id: str, env_kwargs: Mapping[str, Any]) -> EnvPool:
    """This process's pool for (`env_id`, `env_kwargs`): made on first use, then the same one. The key is
    the kwargs as canonical JSON (objects such as a retriever by their repr, which names the object)."""
    key = json.dumps([env_id, dict(env_kwargs)], sort_keys=True, default=repr)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = EnvPool(env_id, env_kwargs)
        return pool


def episode_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of an episode summary (`info["episode"]`), namespaced for a trainer's logs."""
    labels = [t for t in summary["turn_labels"] if t is not None and t.get("contribution") is not None]
    out = {
        "searchgym/em": float(summary["em"]),
        "searchgym/f1": float(summary["f1"]),
        "searchgym/answered": float(summary["outcome"] == "answered"),
        "searchgym/searches": float(summary["searches"]),
        "searchgym/invalid_actions": float(summary["invalid_actions"]),
        "searchgym/format_valid": float(summary["format_valid"]),
        "searchgym/labelled_rounds": float(len(labels)),
        "searchgym/contributing_rounds": float(sum(t["contribution"] for t in labels)),
    }
    if summary.get("entity_rate") is not None:
        out["searchgym/entity_rate"] = float(summary["entity_rate"])
    return out
