"""Judges: per-round labels for CW-GRPO (retrieval utility u, reasoning correctness v, contribution u*v).

- `GoldJudge`: rules over the record's gold annotations; synchronous, cheap enough for every step.
- `LLMJudge`: CW-GRPO's LLM judge over any `ChatBackend`; deferred to the episode's end by default.
- `calibrate`: agreement and Cohen's kappa between a judge and labelled rounds (`load_labelled_rounds`).
"""

from searchgym.judges.base import (
    ERROR_KINDS,
    Judge,
    JudgeRequest,
    JudgeStats,
    SearchRound,
    Verdict,
    resolve_judge,
)
from searchgym.judges.gold import GoldJudge, GoldJudgeConfig
from searchgym.judges.llm import LLMJudge, LLMJudgeConfig

__all__ = [
    "ERROR_KINDS",
    "GoldJudge",
    "GoldJudgeConfig",
    "Judge",
    "JudgeRequest",
    "JudgeStats",
    "LLMJudge",
    "LLMJudgeConfig",
    "SearchRound",
    "Verdict",
    "resolve_judge",
]

