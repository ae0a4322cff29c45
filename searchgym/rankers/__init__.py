"""Rankers choose which `top_k` of a search's candidate pool the agent is shown."""

from searchgym.rankers.base import IdentityRanker, Ranker, RankResult, resolve_ranker

__all__ = ["IdentityRanker", "RankResult", "Ranker", "resolve_ranker"]
