"""The `Judge` protocol and the values it exchanges with the environment.

A judge labels search rounds. The environment hands it `JudgeRequest`s (the record with its gold
annotations, the round to judge and the rounds before it) and gets back one `Verdict` per request:
retrieval utility u and reasoning correctness v, both 0 or 1, and p = u * v. Requests from any number of
rounds and episodes can go in one call; judges that call a model batch them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, runtime_checkable

from searchgym.errors import ConfigError

if TYPE_CHECKING:
    from searchgym.corpus import Document
    from searchgym.data.records import QARecord
    from searchgym.info import TurnLabels

ErrorKind = Literal["timeout", "backend", "malformed", "exception", "count_mismatch"]
ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)


@dataclass(frozen=True, slots=True)
class SearchRound:
    """One search round as the agent lived it: its reasoning, its query and what it was shown."""

    thinking: str
    query: str
    docs: tuple[Document, ...]
    """The shown documents, in shown order."""


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """Everything a judge may look at to label one search round."""

    record: QARecord
    """The question with its answers and gold annotations (an LLM judge sees only the question)."""
    round: SearchRound
    """The round to judge (the latest one)."""
    history: tuple[SearchRound, ...] = ()
    """The episode's earlier search rounds, oldest first."""
    turn: int = 0
    """The round's turn index in its episode (for logs and calibration files)."""
    gold_docs_searchable: bool | None = None
    """Whether the record's gold document ids exist in the corpus searched (None: unknown). With an
    external corpus such as wiki-18 they do not, and a gold judge must match by title instead."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's labels for one round."""

    retrieval_utility: int
    reasoning_correctness: int
    analysis: str | None = None
    failed: bool = False
    error: ErrorKind | None = None

    def __post_init__(self) -> None:
        if self.retrieval_utility not in (0, 1) or self.reasoning_correctness not in (0, 1):
            raise ValueError(f"labels must be 0 or 1, got u={self.retrieval_utility!r}, v={self.reasoning_correctness!r}")
        if self.error is not None and self.error not in ERROR_KINDS:
            raise ValueError(f"unknown judge error kind {self.error!r}; one of {ERROR_KINDS}")

    @property
    def contribution(self) -> int:
        return self.retrieval_utility * self.reasoning_correctness

    @classmethod
    def failure(cls, error: ErrorKind, analysis: str | None = None) -> Verdict:
        """The documented outcome of a judge failure: both labels 0, flagged."""
        return cls(0, 0, analysis=analysis, failed=True, error=error)


@runtime_checkable
class Judge(Protocol):
    """Labels search rounds with retrieval utility and reasoning correctness.

    Optional: a judge that looks for names in the round's texts may define `names_for(record)`, the
    names besides the gold entities it looks for; the env's entity matcher then scans each text and
    shown document once for both (`GoldJudge` does; see `searchgym.entities.prepare_gold`). The env
    calls it when an episode starts (at `reset`), so it is also where a judge prepares a record.

    Optional too: `start(record, gold_docs_searchable)`, returning an object whose `label(round)` labels
    one episode's rounds in order, each with the verdict `label` would give for a request holding the
    rounds before it, or None to be labelled through `label`. A synchronous env labels through it when
    the judge has it (`GoldJudge` does: it then carries what earlier rounds showed along instead of
    looking it up at every step).
    """

    name: str
    """Short name recorded in every `TurnLabels` (`gold`, `llm`)."""
    deferred: bool
    """True when the judge is slow and the environment should call it once per episode, at its end,
    with every search round of the episode (labels then arrive in the episode summary)."""

    def label(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        """One verdict per request, in order. Should not raise; a judge that cannot label a round
        returns `Verdict.failure(...)` for it. (The environment still guards against exceptions.)"""
        ...

    def describe(self) -> dict[str, Any]:
        """A JSON-serializable description of the judge and its settings."""
        ...


@dataclass
class JudgeStats:
    """Counters a judge keeps over its lifetime (metric names `judge/<field>`)."""

    requests: int = 0
    """Rounds asked for."""
    cache_hits: int = 0
    backend_calls: int = 0
    """Calls to the chat backend (each a batch)."""
    retries: int = 0
    """Rounds asked again after a malformed reply."""
    failures: int = 0
    """Rounds that ended as `Verdict.failure` (labels 0)."""
    timeout: int = 0
    backend: int = 0
    malformed: int = 0
    exception: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, **counts: int) -> None:
        with self._lock:
            for key, n in counts.items():
                setattr(self, key, getattr(self, key) + n)

    def as_metrics(self) -> dict[str, int]:
        return {f"judge/{k}": v for k, v in asdict(self).items()}


def to_turn_labels(verdict: Verdict, judge: str, *, deferred: bool) -> TurnLabels:
    return {
        "retrieval_utility": verdict.retrieval_utility,
        "reasoning_correctness": verdict.reasoning_correctness,
        "contribution": verdict.contribution,
        "judge": judge,
        "deferred": deferred,
        "pending": False,
        "failed": verdict.failed,
        "analysis": verdict.analysis,
        "error": verdict.error,
    }


def empty_turn_labels(judge: str, *, deferred: bool, pending: bool) -> TurnLabels:
    """Labels without values: a non-search turn (pending=False) or a deferred search turn (pending=True)."""
    return {
        "retrieval_utility": None,
        "reasoning_correctness": None,
        "contribution": None,
        "judge": judge,
        "deferred": deferred,
        "pending": pending,
        "failed": False,
        "analysis": None,
        "error": None,
    }


def resolve_judge(judge: str | Judge | None) -> Judge | None:
    """A judge from `None`, `"gold"` or a `Judge` object (`"auto"`, the envs' default, is the env's choice
    per question: `SearchQAEnv` resolves it)."""
    if judge is None:
        return None
    if isinstance(judge, str):
        if judge == "gold":
            from searchgym.judges.gold import GoldJudge

            return GoldJudge()
        if judge == "llm":
            raise ConfigError("judge='llm' needs a model: pass judge=LLMJudge(backend) with a ChatBackend "
                              "(searchgym.backends.openai.OpenAIChatBackend or transformers.TransformersChatBackend)")
        raise ConfigError(f"unknown judge {judge!r}; use 'auto' (in an env), None, 'gold' or a Judge object (e.g. LLMJudge(backend))")
    if not isinstance(judge, Judge):
        raise ConfigError(f"judge must have name, deferred, label(requests) and describe(); got {type(judge).__name__}")
    return judge
