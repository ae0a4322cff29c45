"""`QARecord`: one question with its gold answers and the annotations credit assignment needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class QARecord:
    """A question, its gold answers and its gold annotations.

    The environment shows only `question` to the agent; everything else is for scoring, judging and
    entity matching. A record needs a gold answer or, failing that, gold documents: a retrieval query
    (BEIR) is scored by the documents it finds (`searchgym.rewards.documents`), not by an answer.
    """

    id: str
    """Unique within its dataset."""
    question: str
    """The question text as shown to the agent."""
    answers: tuple[str, ...]
    """Every accepted answer string (aliases included); the first is the canonical one. Empty only for a
    record scored by its gold documents (a BEIR query)."""
    gold_entities: tuple[str, ...] = ()
    """Entities the question was built from or that a solution must pass through (E-GRPO's gold
    entities). Which entities a dataset provides is documented per loader."""
    gold_docs: tuple[str, ...] = ()
    """Ids of the supporting documents in the record's own corpus, in hop order where known."""
    gold_titles: tuple[str, ...] = ()
    """Titles of the supporting documents, for matching against a corpus with other ids (wiki-18)."""
    hops: int | None = None
    """Number of reasoning hops, where the dataset says (MuSiQue, synthetic) or implies (HotpotQA: 2)."""
    source: str = ""
    """Dataset name, e.g. `hotpotqa`, `nq`, `synthetic`."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the source file carries (question type, level, PopQA's subject...)."""
    doc_relevance: Mapping[str, float] = field(default_factory=dict)
    """Graded relevance of judged documents by id (BEIR's qrels: score > 0 is relevant), for graded
    document rewards such as nDCG; empty where the dataset grades none (every gold document then counts 1,
    see `relevance`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise ValueError(f"record {self.id!r}: empty question")
        if not self.answers and not self.gold_docs:
            raise ValueError(f"record {self.id!r}: no gold answer")

    @property
    def relevance(self) -> Mapping[str, float]:
        """Relevance of each judged document: `doc_relevance` where the dataset grades documents, else 1
        for every gold document."""
        return self.doc_relevance or dict.fromkeys(self.gold_docs, 1.0)
