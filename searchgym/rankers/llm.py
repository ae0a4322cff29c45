"""The COSEARCH generative ranker: an LLM reads the question, the sub-query and the numbered candidates and
answers `<reason>...</reason><rerank>[i1] > [i2] > ... > [iK]</rerank>`.

The model is reached through a `ChatBackend`, so an OpenAI-compatible server, an in-process model or a
policy being trained (the `agents` package) can stand behind it. Output that does not parse (missing
tags, a wrong number of indices, a repeat, an index out of range) or a failed backend call falls back
to retriever order and is flagged `valid=False`: COSEARCH's ranker reward gives such calls -alpha.
Every call is recorded in `RankResult.call` (the env puts it in `info["ranker"]`): the prompt, the raw
output, the parsed order and its validity, which is what training the ranker needs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.backends import ChatBackend, ChatMessage
from searchgym.errors import BackendError, ConfigError
from searchgym.info import RankerCallRecord
from searchgym.rankers.base import RankResult
from searchgym.retrieval.base import Hit

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You rank search results for a research assistant. Given a question, the sub-query just searched, and "
    "numbered candidate documents, choose the {k} documents most useful for answering the question, best first. "
    "First explain your choice briefly inside <reason></reason>, then give exactly {k} distinct candidate "
    "numbers inside <rerank></rerank> in the form [3] > [1] > [7]."
)
USER_PROMPT = (
    "Question: {question}\nSub-query: {query}\n\nCandidates:\n{candidates}\n\nSelect the {k} most useful documents."
)


@dataclass(frozen=True)
class RerankParse:
    """The result of parsing one ranker output."""

    order: tuple[int, ...]
    """0-based candidate positions, best first; empty when invalid."""
    valid: bool
    reason: str | None
    """The text inside <reason>, when present."""
    error: str | None
    """Why the output is invalid: `no_reason`, `no_rerank`, `bad_item`, `wrong_count`, `duplicate`,
    `out_of_range`, and in strict mode `two_reasons`, `extra_text`; None when valid."""


_REASON = re.compile(r"<reason>(.*?)</reason>", re.DOTALL)
_RERANK = re.compile(r"<rerank>(.*?)</rerank>", re.DOTALL)
_ITEM = re.compile(r"\[\s*(\d+)\s*\]")
_STRICT_ITEM = re.compile(r"\[(\d+)\]")
_STRICT_TAIL = re.compile(r"<rerank>(.*?)</rerank>", re.DOTALL)


def parse_rerank(text: str, num_candidates: int, k: int, *, strict: bool = True) -> RerankParse:
    """Parse `<reason>...</reason><rerank>[i] > [j] > ...</rerank>`.

    Valid output has a reason block, then a rerank block holding exactly min(k, num_candidates) items
    of the form `[i]` separated by `>`, each a 1-based candidate number, all different.

    `strict` (the default) follows COSEARCH's official validator: exactly one reason block, nothing after
    `</reason>` but the rerank block (whitespace aside), and items written `[3]`, not `[ 3 ]`; text before
    the reason block is allowed, as there. `strict=False` ignores text around the blocks, reads the first
    rerank block after the first reason block and allows spaces inside the brackets.

    >>> parse_rerank("<reason>3 names the city</reason><rerank>[3] > [1]</rerank>", 5, 2).order
    (2, 0)
    >>> parse_rerank("<reason>r</reason><rerank>[3] > [3]</rerank>", 5, 2).error
    'duplicate'
    >>> parse_rerank("<reason>r</reason><rerank>[3] > [1]</rerank> done", 5, 2).error
    'extra_text'
    >>> parse_rerank("<reason>r</reason><rerank>[3] > [1]</rerank> done", 5, 2, strict=False).order
    (2, 0)
    """
    reasons = list(_REASON.finditer(text))
    if not reasons:
        return RerankParse((), False, None, "no_reason")
    reason = reasons[0].group(1).strip()
    if strict:
        if len(reasons) > 1:
            return RerankParse((), False, reason, "two_reasons")
        tail = text[reasons[0].end():].strip()
        rerank_m = _STRICT_TAIL.fullmatch(tail)
        if rerank_m is None:
            return RerankParse((), False, reason, "extra_text" if _RERANK.search(tail) else "no_rerank")
    else:
        rerank_m = _RERANK.search(text, reasons[0].end())
        if rerank_m is None:
            return RerankParse((), False, reason, "no_rerank")
    item = _STRICT_ITEM if strict else _ITEM
    parts = [p.strip() for p in rerank_m.group(1).split(">")]
    numbers = []
    for part in parts:
        m = item.fullmatch(part)
        if m is None:
            return RerankParse((), False, reason, "bad_item")
        numbers.append(int(m.group(1)))
    if len(numbers) != min(k, num_candidates):
        return RerankParse((), False, reason, "wrong_count")
    if len(set(numbers)) != len(numbers):
        return RerankParse((), False, reason, "duplicate")
    if any(not 1 <= n <= num_candidates for n in numbers):
        return RerankParse((), False, reason, "out_of_range")
    return RerankParse(tuple(n - 1 for n in numbers), True, reason, None)


@dataclass(frozen=True)
class LLMRankerConfig:
    """Prompting and decoding settings of the generative ranker."""

    max_doc_chars: int = 400
    """Each candidate's text is cut to this many characters in the prompt."""
    max_tokens: int = 512
    """Generation budget for the reason and the ranking."""
    temperature: float = 0.0
    """0 for evaluation; COSEARCH samples (e.g. 1.0) while training the ranker."""
    system_prompt: str = SYSTEM_PROMPT
    """Must contain `{k}`."""
    user_prompt: str = USER_PROMPT
    """Must contain `{question}`, `{query}`, `{candidates}` and `{k}`."""
    strict: bool = True
    """Parse outputs as COSEARCH's official validator does (one reason block, nothing after the rerank
    block, `[3]` not `[ 3 ]`); False accepts those too (`parse_rerank`)."""

    def __post_init__(self) -> None:
        if self.max_doc_chars < 1:
            raise ConfigError(f"LLMRankerConfig.max_doc_chars must be >= 1, got {self.max_doc_chars}")
        if self.max_tokens < 1:
            raise ConfigError(f"LLMRankerConfig.max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ConfigError(f"LLMRankerConfig.temperature must be >= 0, got {self.temperature}")
        for name, fields in (
            ("system_prompt", ("{k}",)),
            ("user_prompt", ("{question}", "{query}", "{candidates}", "{k}")),
        ):
            missing = [f for f in fields if f not in getattr(self, name)]
            if missing:
                raise ConfigError(f"LLMRankerConfig.{name} lacks the field(s) {missing}")


@dataclass(frozen=True)
class RankRequest:
    question: str
    query: str
    candidates: Sequence[Hit]
    k: int


class LLMRanker:
    """A `Ranker` that asks a chat model to choose and order the documents shown."""

    def __init__(self, backend: ChatBackend, config: LLMRankerConfig | None = None):
        if not isinstance(backend, ChatBackend):
            raise ConfigError(
                f"backend must have chat(conversations, ...) and describe(); got {type(backend).__name__}"
            )
        self.backend = backend
        self.config = config or LLMRankerConfig()

    def rank(self, question: str, query: str, candidates: Sequence[Hit], k: int) -> RankResult:
        return self.rank_many([RankRequest(question, query, candidates, k)])[0]

    def rank_many(self, requests: Sequence[RankRequest]) -> list[RankResult]:
        """Rank several pools with one batched backend call (e.g. all trajectories of a step)."""
        # An empty pool (or k=0) has nothing to rank: no model call, nothing recorded.
        results: list[RankResult | None] = [
            RankResult(order=()) if not r.candidates or r.k <= 0 else None for r in requests
        ]
        asked = [i for i, r in enumerate(results) if r is None]
        if not asked:
            return results  # type: ignore[return-value]
        prompts = [self.messages(requests[i]) for i in asked]
        outputs: list[str | None]
        failure = None
        try:
            outputs = list(
                self.backend.chat(prompts, max_tokens=self.config.max_tokens, temperature=self.config.temperature)
            )
            if len(outputs) != len(prompts):
                raise BackendError(f"the backend answered {len(outputs)} replies for {len(prompts)} conversations")
        except BackendError as e:
            logger.warning("ranker backend failed (%s); showing retriever order", e)
            outputs, failure = [None] * len(prompts), str(e)
        for i, messages, raw in zip(asked, prompts, outputs):
            req = requests[i]
            n, k = len(req.candidates), min(req.k, len(req.candidates))
            parsed = parse_rerank(raw, n, k, strict=self.config.strict) if isinstance(raw, str) else RerankParse((), False, None, "backend_error")
            order = parsed.order if parsed.valid else tuple(range(k))
            results[i] = RankResult(order=order, call=self._record(req, messages, raw, parsed, order, failure))
        return results  # type: ignore[return-value]

    def messages(self, req: RankRequest) -> list[ChatMessage]:
        """The conversation sent to the model for one request."""
        k = min(req.k, len(req.candidates))
        lines = []
        for i, hit in enumerate(req.candidates, 1):
            text = (
                hit.doc.text
                if len(hit.doc.text) <= self.config.max_doc_chars
                else hit.doc.text[: self.config.max_doc_chars] + "..."
            )
            lines.append(f"[{i}] (Title: {hit.doc.title}) {text}")
        user = self.config.user_prompt.format(question=req.question, query=req.query, candidates="\n".join(lines), k=k)
        return [{"role": "system", "content": self.config.system_prompt.format(k=k)}, {"role": "user", "content": user}]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "llm",
            "backend": self.backend.describe(),
            "max_doc_chars": self.config.max_doc_chars,
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
        }

    def _record(
        self,
        req: RankRequest,
        messages,
        raw: str | None,
        parsed: RerankParse,
        order: tuple[int, ...],
        failure: str | None,
    ) -> RankerCallRecord:
        return {
            "ranker": "llm",
            "question": req.question,
            "query": req.query,
            "candidate_ids": [h.doc.id for h in req.candidates],
            "k": len(order),
            "messages": messages,
            "raw_output": raw,
            "order": list(order),
            "valid": parsed.valid,
            "fallback": not parsed.valid,
            "error": parsed.error,
            "reason": parsed.reason,
            "backend_error": failure,
        }
