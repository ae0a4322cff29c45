"""The oracle ranker: candidates that hold a gold answer first, then the rest, each part in retriever order.

COSEARCH's oracle experiment: with answer-bearing documents moved to the top of what the agent is shown,
how much better does the agent answer? The gain bounds what a better ranker could buy over the retriever's
order (the paper: +14.7% F1 for a 7B agent, +26.8% for a 3B one). A candidate holds an answer when a
normalized gold answer occurs as a whole-token span in its title and text (`cover_exact_match`, the rule
COSEARCH's Hit@k uses for relevance).

The ranker knows the gold answers of the questions it was built for (the env's records); it is an
analysis tool, never a policy's ranker in a benchmark. `SearchQAEnv(..., ranker="oracle")` builds one
over the env's own records.

`GoldPassageRanker` (`ranker="gold"`) is the reading oracle beside it: the question's gold passages
(`QARecord.gold_docs`, the passage each hop's fact is stated in) first. A cold start that imitates oracle
trajectories can show them (`OptimConfig.cold_start_shows="gold"`), so that each oracle turn reads its
fact from the document it was shown even where the retriever's first document is a decoy
(`WorldConfig.decoy_rate`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.errors import BatchError, ConfigError
from searchgym.rankers.base import RankResult
from searchgym.retrieval.base import Hit
from searchgym.rewards import cover_exact_match

logger = logging.getLogger(__name__)


def answer_bearing(docs: Iterable[Document], answers: Sequence[str]) -> list[int]:
    """Positions of the documents whose title or text holds a gold answer as a whole-token span."""
    # Title and text joined by a newline, which normalizes to a space: an answer never spans the two
    # unless it is written across them, as "Paris" + "France" is not "Paris France".
    return [i for i, d in enumerate(docs) if cover_exact_match(f"{d.title}\n{d.text}", answers)]


class OracleRanker:
    """Shows the answer-bearing candidates first, then the others, each in retriever order.

    `answers`: each question's gold answers, keyed by the question text (what `Ranker.rank` receives).
    A question asked with no known answers (the ranker was built for other records) is a `BatchError`
    rather than a silent fall back to retriever order.

    >>> from searchgym.data.records import QARecord
    >>> ranker = OracleRanker.from_records([QARecord(id="q", question="Capital of France?", answers=("Paris",))])
    >>> ranker.describe()["questions"]
    1
    """

    def __init__(self, answers: Mapping[str, Sequence[str]]):
        self.answers = {q: tuple(a) for q, a in answers.items()}
        empty = [q for q, a in self.answers.items() if not a]
        if empty:
            raise ConfigError(f"OracleRanker needs gold answers for every question; none for {empty[0]!r}")

    @classmethod
    def from_records(cls, records: Iterable[QARecord]) -> OracleRanker:
        """An oracle over `records`' answers; records that share a question text pool their answers."""
        answers: dict[str, list[str]] = {}
        for r in records:
            pooled = answers.setdefault(r.question, [])
            pooled.extend(a for a in r.answers if a not in pooled)
        return cls(answers)

    def rank(self, question: str, query: str, candidates: Sequence[Hit], k: int) -> RankResult:
        golds = self.answers.get(question)
        if golds is None:
            raise BatchError(f"OracleRanker has no gold answers for question {question!r}: build it from the records "
                              "the env asks (OracleRanker.from_records(records), or the env option ranker='oracle')")
        # No call record: `info["ranker"]` holds model ranker calls, which COSEARCH's learner trains on.
        return first_then_rest(answer_bearing((h.doc for h in candidates), golds), len(candidates), k)

    def describe(self) -> dict[str, Any]:
        return {"kind": "oracle", "relevance": "cover_em(title + text, gold answers)", "questions": len(self.answers)}


class GoldPassageRanker:
    """Shows the candidates that are one of the question's gold passages first, then the others, each part in
    retriever order.

    `gold_docs`: each question's gold passage ids, keyed by the question text. A question asked with none
    known is a `BatchError`, as with `OracleRanker`.

    >>> from searchgym.data.records import QARecord
    >>> ranker = GoldPassageRanker.from_records([QARecord(id="q", question="Q?", answers=("a",), gold_docs=("d2",))])
    >>> ranker.describe()["questions"]
    1
    """

    def __init__(self, gold_docs: Mapping[str, Sequence[str]]):
        self.gold_docs = {q: frozenset(d) for q, d in gold_docs.items()}
        empty = [q for q, d in self.gold_docs.items() if not d]
        if empty:
            raise ConfigError(f"GoldPassageRanker needs gold passages (QARecord.gold_docs) for every question; none for {empty[0]!r}")

    @classmethod
    def from_records(cls, records: Iterable[QARecord]) -> GoldPassageRanker:
        """A gold-passage ranker over `records`; records that share a question text pool their passages."""
        gold: dict[str, set[str]] = {}
        for r in records:
            gold.setdefault(r.question, set()).update(r.gold_docs)
        return cls(gold)

    def rank(self, question: str, query: str, candidates: Sequence[Hit], k: int) -> RankResult:
        gold = self.gold_docs.get(question)
        if gold is None:
            raise BatchError(f"GoldPassageRanker has no gold passages for question {question!r}: build it from the records "
                             "the env asks (GoldPassageRanker.from_records(records), or the env option ranker='gold')")
        return first_then_rest([i for i, h in enumerate(candidates) if h.doc.id in gold], len(candidates), k)

    def describe(self) -> dict[str, Any]:
        return {"kind": "gold", "relevance": "id in the question's gold_docs", "questions": len(self.gold_docs)}


def first_then_rest(first: Sequence[int], n: int, k: int) -> RankResult:
    """The first `k` of: the candidate positions `first`, then the other of the `n` candidates, in retriever
    order (what both oracle rankers show).

    >>> first_then_rest([2], 4, 3).order
    (2, 0, 1)
    """
    chosen = set(first)
    order = list(first) + [i for i in range(n) if i not in chosen]
    return RankResult(order=tuple(order[:max(k, 0)]))
