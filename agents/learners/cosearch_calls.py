"""COSEARCH's ranker calls as the learner reads them from step info, and the hit metrics over them.

A call record is what `searchgym.rankers.llm.LLMRanker` writes to `info["ranker"]`; `RankerCall` holds one
with its candidates' texts, `calls_from_trajectory` reads a trajectory's, and `ranking_hits` /
`kept_order_rate` say how the ranker's shown order compares with the retriever's. The reward and the
groups built from these calls are in `agents.learners.cosearch`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.errors import BatchError
from searchgym.info import StepInfo
from searchgym.rewards import cover_exact_match

__all__ = ["RankerCall", "answer_holders", "calls_from_trajectory", "hits_at", "kept_order_rate", "ranking_hits"]


@dataclass(frozen=True)
class RankerCall:
    """One ranker call, as a learner needs it, read from step info `info["ranker"]`.

    `from_info` expects the keys `searchgym.rankers.llm.LLMRanker` writes: `query` (the sub-query),
    `candidate_ids` (the N candidates in retriever order), `order` (0-based candidate positions shown,
    best first; the retriever-order fallback when invalid), `valid` (the output parsed), and optionally
    `question`, `messages` and `raw_output` (what training the ranker replays). The candidates' texts
    come from a `candidate_texts` key when present, else from `texts` (id -> text, e.g. the corpus).
    """

    query: str
    candidate_ids: tuple[str, ...]
    candidate_texts: tuple[str, ...]
    order: tuple[int, ...]
    valid: bool
    question: str = ""
    trajectory: int = 0
    """Index of the trajectory that made the call (its r_main is that trajectory's answer F1)."""
    turn: int = 0
    messages: tuple[Mapping[str, str], ...] | None = None
    raw_output: str | None = None

    def __post_init__(self) -> None:
        if len(self.candidate_ids) != len(self.candidate_texts):
            raise BatchError(f"{len(self.candidate_ids)} candidate ids but {len(self.candidate_texts)} texts")
        if any(not 0 <= i < len(self.candidate_ids) for i in self.order) or len(set(self.order)) != len(self.order):
            raise BatchError(
                f"order {self.order} must hold distinct positions into {len(self.candidate_ids)} candidates"
            )

    @classmethod
    def from_info(
        cls,
        call: Mapping[str, Any],
        *,
        texts: Mapping[str, str] | Callable[[str], str] | None = None,
        trajectory: int = 0,
        turn: int = 0,
    ) -> RankerCall:
        missing = [k for k in ("query", "candidate_ids", "order", "valid") if k not in call]
        if missing:
            raise BatchError(f"ranker call record lacks {missing}; a model ranker (searchgym.rankers.llm) writes them")
        ids = tuple(str(i) for i in call["candidate_ids"])
        if "candidate_texts" in call:
            candidate_texts = tuple(call["candidate_texts"])
        elif texts is None:
            raise BatchError(
                "the ranker call record has no candidate_texts: pass texts= (doc id -> text, e.g. from the corpus)"
            )
        else:
            lookup = texts if callable(texts) else texts.__getitem__
            try:
                candidate_texts = tuple(lookup(i) for i in ids)
            except KeyError as e:
                raise BatchError(f"no text for candidate {e.args[0]!r}; texts must cover every candidate id") from None
        messages = call.get("messages")
        return cls(
            query=str(call["query"]),
            candidate_ids=ids,
            candidate_texts=candidate_texts,
            order=tuple(int(i) for i in call["order"]),
            valid=bool(call["valid"]),
            question=str(call.get("question", "")),
            trajectory=trajectory,
            turn=turn,
            messages=None if messages is None else tuple(messages),
            raw_output=call.get("raw_output"),
        )


def calls_from_trajectory(
    infos: Sequence[StepInfo],
    *,
    texts: Mapping[str, str] | Callable[[str], str] | None = None,
    trajectory: int = 0,
) -> list[RankerCall]:
    """The ranker calls of one trajectory (steps whose `info["ranker"]` is set), in turn order."""
    return [
        RankerCall.from_info(info["ranker"], texts=texts, trajectory=trajectory, turn=int(info.get("turn", t)))
        for t, info in enumerate(infos)
        if info.get("ranker")
    ]


def answer_holders(call: RankerCall, golds: Sequence[str]) -> list[bool]:
    """For each candidate of `call`, whether its text holds a gold answer (I_ans's per-candidate test)."""
    return [cover_exact_match(text, golds) > 0 for text in call.candidate_texts]


def hits_at(order: Sequence[int], relevant: Sequence[bool], ks: Sequence[int] = (1, 3, 5)) -> list[float]:
    """Hit@k for each k: 1.0 when a relevant candidate is among the first k shown."""
    return [float(any(relevant[i] for i in order[:k])) for k in ks]


def ranking_hits(calls: Sequence[RankerCall], golds: Sequence[Sequence[str]], ks: Sequence[int] = (1, 3, 5)) -> dict[str, float]:
    """Mean Hit@k of the ranker's shown order (`ranker/hit@k`) against what the env would have shown in the
    retriever's order (`ranker/retriever_hit@k`: its first as many candidates as the ranker showed), over the
    calls whose candidates hold a gold answer (the others cannot hit); `ranker/answerable_calls` counts
    those. With fewer documents shown than k, Hit@k is Hit@(documents shown) on both sides.

    >>> call = RankerCall("q", ("a", "b", "c"), ("x", "Paris", "y"), order=(1, 0), valid=True)
    >>> ranking_hits([call], [["Paris"]], ks=(1,))
    {'ranker/answerable_calls': 1.0, 'ranker/hit@1': 1.0, 'ranker/retriever_hit@1': 0.0}
    """
    shown, retriever = [], []
    for call, gold in zip(calls, golds):
        relevant = answer_holders(call, gold)
        if any(relevant):
            shown.append(hits_at(call.order, relevant, ks))
            retriever.append(hits_at(range(len(call.order)), relevant, ks))
    out = {"ranker/answerable_calls": float(len(shown))}
    if shown:
        for j, k in enumerate(ks):
            out[f"ranker/hit@{k}"] = sum(h[j] for h in shown) / len(shown)
            out[f"ranker/retriever_hit@{k}"] = sum(h[j] for h in retriever) / len(retriever)
    return out


def kept_order_rate(calls: Sequence[RankerCall]) -> float | None:
    """The share of valid calls whose shown order is the retriever's own first candidates, in its order: a
    ranker that only copies the retriever scores 1.0 (None without a valid call).

    >>> calls = [RankerCall("q", ("a", "b"), ("x", "y"), order=(0, 1), valid=True),
    ...          RankerCall("q", ("a", "b"), ("x", "y"), order=(1, 0), valid=True),
    ...          RankerCall("q", ("a", "b"), ("x", "y"), order=(0, 1), valid=False)]
    >>> kept_order_rate(calls)
    0.5
    """
    valid = [c for c in calls if c.valid]
    return sum(tuple(c.order) == tuple(range(len(c.order))) for c in valid) / len(valid) if valid else None
