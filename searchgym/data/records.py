"""`QARecord`: one question with its gold answers and the annotations credit assignment needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class QARecord:
    """A question, its gold answers and its gold annotations.

    The environment shows only `question` to the agent; everything else is for scoring, judging and
    entity matching.
    """

    id: str
    """Unique within its dataset."""
    question: str
    """The question text as shown to the agent."""
    answers: tuple[str, ...]
    """Every accepted answer string (aliases included); the first is the canonical one."""
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

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise ValueError(f"record {self.id!r}: empty question")
        if not self.answers:
            raise ValueError(f"record {self.id!r}: no gold answer")
