"""`GoldJudge`: rule-based labels from a record's gold annotations, cheap enough for every step.

What the labels mean
--------------------
Names below are compared with `searchgym.entities` (whole phrases after normalization). The *evidence
basis* decides which shown documents are relevant (`GoldJudgeConfig.relevance`; `auto` picks the first
that applies):

- `doc_ids`: a document is relevant when its id is one of `record.gold_docs` (used when the record has gold
  documents and they exist in the corpus searched);
- `titles`: when its title is one of `record.gold_titles` (an external corpus such as wiki-18, where only
  titles carry over; documents of one title count as one);
- `answers`: when its title or text contains a gold answer (records with no gold documents or titles:
  NQ, TriviaQA, Bamboogle; yes/no answers never count, they match too much).

Each relevant document has a key (its id; its title for `titles`; one shared key for `answers`). A round
has **retrieval utility u = 1** iff it shows a relevant document whose key no earlier round showed. So a
gold document shown again is not novel, and under `answers` only the first answer-bearing round counts.

**Reasoning correctness v = 1** iff all of these hold:

1. *grounded*: every gold name (gold entities, gold titles, answers other than yes/no) that the round's
   thinking or query mentions already appears in the question or in a document shown in an earlier round.
   Naming the next entity before any evidence revealed it is a guess, even a lucky one;
2. *not a repeat*: the normalized query differs from every earlier query;
3. *something is missing*: not all needed evidence has been seen yet (every gold document for `doc_ids`,
   every gold title for `titles`, any answer-bearing document for `answers`);
4. *targets the frontier*: the targets are the grounded gold titles whose evidence is not yet seen (the
   subject of an open hop; both sides of a comparison) and the latest grounded gold entity in hop order
   (the bridge just found, whose document may carry another title). A query that names a gold entity or
   title must name a target. A query that names none is useful only while no document has revealed a
   gold entity beyond the question, and then only if at least `min_question_overlap` of its content
   words occur in the question (a rephrasing of what is asked). A rephrased retry after a failed search
   stays useful: it names the same target with other words.

Blind spots, by construction: claims about entities that are not gold (an invented founder, a twin's
facts) are invisible to rule 1, and common knowledge counts as ungrounded. The synthetic calibration set
(`searchgym judge calibrate`) measures how often this matters.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, get_args

from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.entities import PhraseSet, cache_generation, normalize_entity, prepare_gold
from searchgym.errors import ConfigError
from searchgym.judges.base import JudgeRequest, SearchRound, Verdict

__all__ = ["GoldEpisode", "GoldJudge", "GoldJudgeConfig"]

Basis = Literal["doc_ids", "titles", "answers"]
Relevance = Literal["auto", Basis]

_TRIVIAL_ANSWERS = frozenset({"yes", "no"})
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from has have how in into is it its of on or the to was were what "
    "when where which who whom whose why with".split()
)


@dataclass(frozen=True)
class GoldJudgeConfig:
    relevance: Relevance = "auto"
    """The evidence basis (see the module docstring); `auto`: `doc_ids` when the record has gold documents
    that the corpus holds, else `titles` when it has gold titles, else `answers`."""
    min_question_overlap: float = 0.5
    """Share of a query's content words that must occur in the question when the query names no gold
    title, for the query to count as useful."""

    def __post_init__(self) -> None:
        if self.relevance not in get_args(Relevance):
            raise ConfigError(f"GoldJudgeConfig.relevance must be auto, doc_ids, titles or answers; got {self.relevance!r}")
        if not 0.0 <= self.min_question_overlap <= 1.0:
            raise ConfigError(f"GoldJudgeConfig.min_question_overlap must be in [0, 1], got {self.min_question_overlap}")


def _other_names(rec: QARecord) -> tuple[str, ...]:
    """The names besides the gold entities that the judge looks for: gold titles and answers (yes/no
    left out)."""
    return (*rec.gold_titles, *(a for a in rec.answers if normalize_entity(a) not in _TRIVIAL_ANSWERS))


def _content_words(normalized: str) -> list[str]:
    return [w for w in normalized.split() if w not in _STOPWORDS]


class _Gold(NamedTuple):
    """A record's gold annotations, normalized once."""

    ids: frozenset[str]
    titles: tuple[str, ...]
    entities: tuple[str, ...]
    """Hop order."""
    names: tuple[str, ...]
    """Entities, then titles, then answers (yes/no left out), duplicates collapsed."""
    other: tuple[str, ...]
    """The names looked for besides the gold entities, as given to `prepare_gold` (`_other_names`)."""
    name_set: PhraseSet
    """`names`, to find in raw texts."""
    answer_ids: frozenset[int]
    """Indices into `names` of the answers (found with `name_set`, so documents are scanned once)."""
    in_question: frozenset[str]
    """Names that the question itself mentions."""
    asked: frozenset[str]
    """The question's content words."""
    start: _Seen
    """What an episode has seen before its first round: the question."""

    @classmethod
    def of(cls, rec: QARecord) -> _Gold:
        titles = tuple(dict.fromkeys(t for t in map(normalize_entity, rec.gold_titles) if t))
        answers = tuple(dict.fromkeys(a for a in map(normalize_entity, rec.answers) if a and a not in _TRIVIAL_ANSWERS))
        # The entity matcher of the same episode asks for this very PhraseSet (`GoldJudge.names_for`),
        # so each text and document is scanned once for both.
        other = _other_names(rec)
        _, name_set, m = prepare_gold(tuple(rec.gold_entities), other)
        names = name_set.phrases
        entities = names[:m]
        in_question = frozenset(names[i] for i in name_set.find(rec.question))
        answer_ids = frozenset(names.index(a) for a in answers)
        return cls(frozenset(rec.gold_docs), titles, entities, names, other, name_set, answer_ids, in_question,
                   frozenset(_content_words(normalize_entity(rec.question))),
                   _Seen(frozenset(), frozenset(), in_question, frozenset()))


class _Seen(NamedTuple):
    """What the rounds before the judged one showed. (A named tuple: one is built per judged round, and
    a tuple builds faster than a frozen dataclass.)"""

    keys: frozenset[str]
    """Relevance keys of the relevant documents shown."""
    resolved: frozenset[str]
    """Normalized titles of the relevant documents shown."""
    grounded: frozenset[str]
    """Gold names that occur in the question or in a shown document."""
    queries: frozenset[str]
    """Normalized earlier queries."""


_STATES = 512  # cached episode prefixes; an episode needs its latest one, so this covers 512 parallel episodes


class GoldJudge:
    """Labels search rounds from gold annotations (see the module docstring for the exact rules).

    >>> from searchgym.corpus import Document
    >>> from searchgym.data.records import QARecord
    >>> from searchgym.judges.base import JudgeRequest, SearchRound
    >>> rec = QARecord("q", "Who discovered radioactivity?", ("Henri Becquerel",), gold_docs=("d5",))
    >>> doc = Document("d5", "Radioactivity", "Radioactivity was discovered by Henri Becquerel.")
    >>> v = GoldJudge().label([JudgeRequest(rec, SearchRound("", "radioactivity discovered", (doc,)))])[0]
    >>> v.retrieval_utility, v.reasoning_correctness
    (1, 1)
    """

    name = "gold"
    deferred = False

    def __init__(self, config: GoldJudgeConfig | None = None):
        self.config = config or GoldJudgeConfig()
        # Records seen lately, by identity (records hold dicts, so they are not hashable): an episode's
        # steps all ask about the same record.
        self._prepared: OrderedDict[int, tuple[QARecord, _Gold, int]] = OrderedDict()
        self._states: OrderedDict[tuple, tuple[QARecord, tuple[SearchRound, ...], _Seen]] = OrderedDict()
        self._lock = threading.Lock()

    def names_for(self, record: QARecord) -> tuple[str, ...]:
        """The names besides the gold entities that labelling `record` looks for. The env's entity
        matcher looks for them in the same scans (they do not count as entities there): see
        `searchgym.entities.prepare_gold`. The env asks when an episode starts (`reset`), so the
        record's annotations are normalized here, once, rather than in the episode's first step."""
        return self._gold(record).other

    def describe(self) -> dict[str, Any]:
        return {"kind": "gold", "relevance": self.config.relevance, "min_question_overlap": self.config.min_question_overlap}

    def label(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return [self.judge(r) for r in requests]

    def basis(self, request: JudgeRequest) -> Basis:
        return self._basis(request.record, request.gold_docs_searchable)

    def _basis(self, rec: QARecord, gold_docs_searchable: bool | None) -> Basis:
        if self.config.relevance != "auto":
            return self.config.relevance
        if rec.gold_docs and gold_docs_searchable is not False:
            return "doc_ids"
        if rec.gold_titles:
            return "titles"
        return "answers"

    def start(self, record: QARecord, gold_docs_searchable: bool | None = None) -> GoldEpisode | None:
        """A judge for one episode's rounds, labelled in order: `episode.label(round)` is the verdict that
        `judge(JudgeRequest(record, round, <the rounds labelled before>, ..., gold_docs_searchable))`
        gives, but what the earlier rounds showed is carried along instead of looked up per request. The
        env labels synchronously through this (see `searchgym.judges.base.Judge`).

        None when a subclass redefines `label`: its rounds then go through that `label`."""
        if type(self).label is not GoldJudge.label:
            return None
        return GoldEpisode(self, self._gold(record), self._basis(record, gold_docs_searchable))

    def _gold(self, rec: QARecord) -> _Gold:
        # Reads take no lock: one dict lookup is atomic, and the identity check catches a reused id.
        # After `clear_caches` the entity matcher gets new phrase sets; the judge must share them.
        generation = cache_generation()
        hit = self._prepared.get(id(rec))
        if hit is not None and hit[0] is rec and hit[2] == generation:
            return hit[1]
        gold = _Gold.of(rec)
        with self._lock:
            self._prepared[id(rec)] = (rec, gold, generation)
            if len(self._prepared) > 256:
                self._prepared.popitem(last=False)
        return gold

    @staticmethod
    def _key(basis: Basis, gold: _Gold, doc: Document) -> str | None:
        """The relevance key of a document, None when it is not relevant."""
        if basis == "doc_ids":
            return doc.id if doc.id in gold.ids else None
        if basis == "titles":
            t = normalize_entity(doc.title)
            return t if t in gold.titles else None
        for i in gold.name_set.find_document(doc.title, doc.text):
            if i in gold.answer_ids:
                return "answer"
        return None

    @classmethod
    def _keys(cls, basis: Basis, gold: _Gold, docs: Sequence[Document]) -> list[str | None]:
        """`_key` of each document (for `doc_ids`, the usual basis, without a call per document)."""
        if basis == "doc_ids":
            ids = gold.ids
            return [d.id if d.id in ids else None for d in docs]
        return [cls._key(basis, gold, d) for d in docs]

    def _seen(self, rec: QARecord, gold: _Gold, basis: Basis, history: tuple[SearchRound, ...]) -> _Seen:
        """What `history` showed. Cached per episode prefix, so that an episode's k-th step only adds the
        (k-1)-th round instead of rescanning them all."""
        if not history:
            return gold.start
        key = (id(rec), basis, *map(id, history))
        # A read takes no lock (one dict lookup is atomic). Equal rounds give equal states, so a reused id
        # is caught by comparing the rounds (by identity first, which is the usual case).
        hit = self._states.get(key)
        if hit is not None and hit[0] is rec and hit[1] == history:
            return hit[2]
        state = self._advance(gold, basis, self._seen(rec, gold, basis, history[:-1]), history[-1])
        with self._lock:
            self._states[key] = (rec, history, state)
            while len(self._states) > _STATES:
                self._states.popitem(last=False)
        return state

    def _advance(self, gold: _Gold, basis: Basis, prev: _Seen, last: SearchRound,
                 last_keys: list[str | None] | None = None) -> _Seen:
        """What was seen before `last`, and then `last` (whose documents' `_keys` may be given)."""
        names, name_set = gold.names, gold.name_set
        grounded: list[str] = []
        keys: list[str] = []
        resolved: list[str] = []
        if last_keys is None:
            last_keys = self._keys(basis, gold, last.docs)
        for doc, k in zip(last.docs, last_keys):
            for i in name_set.find_document(doc.title, doc.text):
                grounded.append(names[i])
            if k is not None:
                keys.append(k)
                resolved.append(normalize_entity(doc.title))
        return _Seen(prev.keys.union(keys), prev.resolved.union(resolved), prev.grounded.union(grounded),
                     prev.queries | {normalize_entity(last.query)})

    def judge(self, request: JudgeRequest) -> Verdict:
        rec = request.record
        gold = self._gold(rec)
        basis = self.basis(request)
        history = request.history if isinstance(request.history, tuple) else tuple(request.history)
        rnd = request.round
        return self._verdict(gold, basis, self._seen(rec, gold, basis, history), rnd, self._keys(basis, gold, rnd.docs))

    def _verdict(self, gold: _Gold, basis: Basis, seen: _Seen, rnd: SearchRound, keys: list[str | None]) -> Verdict:
        """The labels of `rnd`, whose documents have the relevance `keys`, after rounds that showed `seen`."""
        new = None  # the first shown document that is relevant and new
        for d, k in zip(rnd.docs, keys):
            if k is not None and k not in seen.keys:
                new = d.id
                break
        u = int(new is not None)
        u_why = f"u=1: new relevant document {new} ({basis})" if u else f"u=0: no new relevant document ({basis})"
        v, v_why = self._reasoning(rnd, gold, basis, seen)
        return Verdict(u, v, f"{u_why}; {v_why}")

    def _reasoning(self, rnd: SearchRound, gold: _Gold, basis: Basis, seen: _Seen) -> tuple[int, str]:
        # Plain loops rather than comprehensions: this runs at every search step.
        grounded, names = seen.grounded, gold.names
        named = [names[i] for i in gold.name_set.indices(rnd.query)]
        for i in gold.name_set.indices(rnd.thinking):
            if names[i] not in grounded:
                return 0, f"v=0: mentions {names[i]!r} before any evidence showed it"
        for n in named:
            if n not in grounded:
                return 0, f"v=0: mentions {n!r} before any evidence showed it"
        query = normalize_entity(rnd.query)
        if query in seen.queries:
            return 0, "v=0: repeats an earlier query"
        if basis == "doc_ids":
            done = gold.ids <= seen.keys
        elif basis == "titles":
            done = seen.keys.issuperset(gold.titles)
        else:
            done = bool(seen.keys)
        if done:
            return 0, "v=0: all needed evidence was already found"
        # The targets: grounded gold titles whose evidence is not seen yet, and the latest grounded entity.
        latest = None
        beyond_question = False
        for e in gold.entities:
            if e in grounded:
                latest = e
                beyond_question = beyond_question or e not in gold.in_question
        for n in named:
            if n == latest or (n in gold.titles and n in grounded and n not in seen.resolved):
                return 1, f"v=1: query targets {n!r}"
        if named:
            return 0, "v=0: query names only entities whose evidence was already found"
        if beyond_question:
            return 0, "v=0: evidence revealed a gold entity, but the query names none to follow up"
        words = _content_words(query)
        overlap = sum(w in gold.asked for w in words) / len(words) if words else 0.0
        if overlap >= self.config.min_question_overlap:
            return 1, f"v=1: query rephrases the question ({overlap:.2f} overlap)"
        return 0, f"v=0: query is off the question ({overlap:.2f} overlap)"


class GoldEpisode:
    """`GoldJudge.start`: one episode's rounds, labelled in order."""

    __slots__ = ("_judge", "_gold", "_basis", "_seen", "_last", "_last_keys")

    def __init__(self, judge: GoldJudge, gold: _Gold, basis: Basis):
        self._judge, self._gold, self._basis = judge, gold, basis
        self._seen = gold.start
        self._last: SearchRound | None = None
        """The round labelled last, with its documents' relevance keys; added to `_seen` when the next one
        comes (an episode's last round is then never scanned for what it showed)."""
        self._last_keys: list[str | None] = []

    def label(self, rnd: SearchRound) -> Verdict:
        judge, gold, basis = self._judge, self._gold, self._basis
        if self._last is not None:
            self._seen = judge._advance(gold, basis, self._seen, self._last, self._last_keys)
        keys = judge._keys(basis, gold, rnd.docs)
        self._last, self._last_keys = rnd, keys
        return judge._verdict(gold, basis, self._seen, rnd, keys)
