"""Rankers choose which `top_k` of a search's candidate pool the agent is shown."""

from searchgym.rankers.base import IdentityRanker, Ranker, RankResult, resolve_ranker
from searchgym.rankers.llm import LLMRanker, LLMRankerConfig, RankRequest, RerankParse, parse_rerank
from searchgym.rankers.oracle import GoldPassageRanker, OracleRanker, answer_bearing

__all__ = ["GoldPassageRanker", "IdentityRanker", "LLMRanker", "LLMRankerConfig", "OracleRanker", "RankRequest", "RankResult", "Ranker", "RerankParse", "answer_bearing", "parse_rerank", "resolve_ranker"]
