"""`EpisodeTracker`: what a wrapper needs to remember of a text episode (question, searches, documents)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from searchgym.errors import ConfigError
from searchgym.wrappers.candidates import DocView, SearchView


def search_env(env: gym.Env) -> Any:
    """The innermost env, checked to be a searchgym text env (it has `record`, `protocol`, `max_turns`)."""
    base = env.unwrapped
    for attr in ("record", "protocol", "max_turns", "corpus"):
        if not hasattr(base, attr):
            raise ConfigError(
                f"{type(base).__name__} is not a searchgym SearchQAEnv (it has no {attr!r}); the stable-baselines3 "
                "wrappers need gym.make('SearchQA-...') or a SearchQAEnv underneath"
            )
    return base


class EpisodeTracker:
    """The question, the searches made and the documents they showed, rebuilt from `step` infos.

    Documents are looked up by the ids in `info["shown"]` in the env's corpus. When the env has no corpus
    (a remote retriever), each search keeps the shown titles and the observation text as one document, so
    phrases are still found, only without per-document attribution.
    """

    def __init__(self, env: gym.Env):
        self.base = search_env(env)
        self.question = ""
        self.searches: list[SearchView] = []
        self.turn = 0
        self.last_invalid = False
        self.episode = 0
        """Counts `reset` calls, so that caches keyed by (episode, searches) never go stale."""

    def reset(self) -> None:
        record = self.base.record
        if record is None:
            raise ConfigError("the wrapped env returned from reset() without a question record")
        self.question = record.question
        self.searches = []
        self.episode += 1
        self.turn = 0
        self.last_invalid = False

    def update(self, observation: str, info: Mapping[str, Any]) -> None:
        self.turn += 1
        self.last_invalid = bool(info.get("invalid_action", False))
        if info.get("action") == "search":
            self.searches.append(SearchView(str(info.get("query") or ""), self._docs(observation, info)))

    def _docs(self, observation: str, info: Mapping[str, Any]) -> tuple[DocView, ...]:
        shown = info.get("shown") or []
        corpus = self.base.corpus
        if corpus is not None and all(s["id"] in corpus for s in shown):
            return tuple(DocView(corpus.get(s["id"]).title, corpus.get(s["id"]).text) for s in shown)
        titles = tuple(DocView(str(s.get("title", "")), "") for s in shown)
        return titles + (DocView("", observation),)
