"""Candidate actions for a discrete policy: phrases found in the question and the documents shown so far.

Pure functions of the episode's text (no environment, no randomness), so the candidate list of an episode
is reproducible and testable on literal text. `build_candidates` returns the search and answer candidates
with the evidence a feature vector is made from (`Evidence`); `DiscreteCandidateActions` turns them into
slots.

What counts as a phrase: a run of capitalized words, joined by lower-case `of`, `de`, `the`, `and` inside
it ("University of Hetil", "Marie Curie"), plus quoted titles ('Tide of Ash'); a trailing possessive is
dropped. A single capitalized word that opens a sentence ("Friends", "Its") is kept only when it also
occurs capitalized elsewhere or is a document title, because sentence-initial capitals are mostly
ordinary words. Lower-case answers, years and yes/no are not phrases: such answers are not representable.

Cue words relate a sentence to the question: the question's content words (not in its phrases, not
question words or stop words), compared by their first five letters so that "employs" meets "employer"
and "founded" meets "founder".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from searchgym.rewards.answer import normalize_answer

_PHRASE = re.compile(
    r"[A-Z][\w’'-]*(?:(?:\s+(?:of|de|the|and|von|van|du|la))*\s+[A-Z][\w’'-]*)*"
)
_QUOTED = re.compile(r"(?:^|[\s(])['‘\"“]([^'’\"”]{2,80})['’\"”](?=[\s.,;:?!)]|$)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"(?u)\b\w\w+\b")
_POSSESSIVE = re.compile(r"(?:['’]s|['’])$")

CUE_PREFIX = 5
"""Cue words are compared by this many leading letters (a crude stemmer that needs no dictionary)."""

_QUESTION_WORDS = frozenset({
    "who", "whom", "whose", "what", "which", "where", "when", "why", "how", "does", "did", "do", "is", "are",
    "was", "were", "has", "have", "had", "many", "much",
})
_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "if", "in", "into", "is", "it",
    "its", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
    "this", "to", "was", "were", "will", "with", "he", "she", "his", "her", "him", "we", "you", "your", "our",
    "also", "been", "being", "than", "since", "after", "before", "over", "under", "between", "both", "each",
    "one", "two", "same", "other",
})
_NOT_NAMES = frozenset({"doc", "title", "question", "answer"})


@dataclass(frozen=True)
class DocView:
    """One shown document."""

    title: str
    text: str


@dataclass(frozen=True)
class SearchView:
    """One search of the episode: the query and the documents it showed, in shown order."""

    query: str
    docs: tuple[DocView, ...]


@dataclass(frozen=True)
class Evidence:
    """What the episode's text says about one candidate phrase. Counts are over every shown document."""

    in_question: bool
    """The phrase occurs (as whole words, normalized) in the question."""
    is_title: bool
    """A shown document has this title."""
    searched: bool
    """An earlier query of this episode contains the phrase."""
    in_last: bool
    """The phrase occurs in a document of the latest search."""
    in_top_doc: bool
    """The phrase occurs in the first document of the latest search."""
    mentions: int
    """Occurrences in the shown documents (titles included)."""
    cue: float
    """Best share of the question's cue words found in a sentence that contains the phrase (its own words
    excluded), over all shown documents: 0..1."""
    cue_last: float
    """The same over the latest search's documents only."""
    on_topic: bool
    """The phrase occurs in a document whose title is in the question or was searched."""
    age: int
    """Searches since the phrase was first shown (0: the latest); 0 for phrases only in the question."""
    words: int
    """Number of words in the phrase."""


@dataclass(frozen=True)
class Candidate:
    text: str
    evidence: Evidence


@dataclass(frozen=True)
class CandidateSet:
    """The candidate actions of one turn, in slot order (before truncation to the slot counts)."""

    search: tuple[Candidate, ...]
    answer: tuple[Candidate, ...]


def normalize(text: str) -> str:
    """The key phrases are compared by: SQuAD answer normalization (case, punctuation, articles)."""
    return normalize_answer(text)


def split_sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE_END.split(text)) if s]


def _clean(phrase: str) -> str:
    phrase = _POSSESSIVE.sub("", phrase.strip())
    return phrase.strip(" -'’")


def extract_phrases(text: str, *, titles: Sequence[str] = ()) -> list[str]:
    """Capitalized phrases and quoted titles of `text`, in order of first occurrence, deduplicated by
    `normalize`. See the module docstring for the rules."""
    title_keys = {normalize(t) for t in titles}
    sentences = split_sentences(text)
    # Words seen capitalized away from a sentence start vouch for the same word at a sentence start.
    vouched: set[str] = set()
    found: list[tuple[str, bool]] = []
    for sentence in sentences:
        for m in _QUOTED.finditer(sentence):
            found.append((_clean(m.group(1)), False))
        for m in _PHRASE.finditer(sentence):
            phrase = _clean(m.group(0))
            initial = not sentence[: m.start()].strip(" \"'‘“(")
            if not initial:
                vouched.add(normalize(phrase))
            found.append((phrase, initial))
    out: list[str] = []
    seen: set[str] = set()
    for phrase, initial in found:
        key = normalize(phrase)
        if not key or key in seen or key in _NOT_NAMES:
            continue
        single = len(phrase.split()) == 1
        if initial and single and key not in vouched and key not in title_keys:
            continue
        if single and key in _STOPWORDS | _QUESTION_WORDS:
            continue
        seen.add(key)
        out.append(phrase)
    return out


def cue_keys(text: str, *, exclude: Sequence[str] = ()) -> frozenset[str]:
    """The cue keys of `text`: content words' first `CUE_PREFIX` letters, without the words of `exclude`."""
    excluded = {w for phrase in exclude for w in _WORD.findall(phrase.lower())}
    return frozenset(
        w[:CUE_PREFIX]
        for w in _WORD.findall(text.lower())
        if w not in excluded and w not in _STOPWORDS and w not in _QUESTION_WORDS and not w.isdigit()
    )


def _contains(haystack_key: str, needle_key: str) -> bool:
    return bool(needle_key) and f" {needle_key} " in f" {haystack_key} "


class _EpisodeText:
    """What a phrase's evidence is read from: the question, and the documents each search showed."""

    def __init__(self, question: str, searches: Sequence[SearchView]) -> None:
        self.q_phrases = extract_phrases(question)
        self.q_key = normalize(question)
        self.q_cues = cue_keys(question, exclude=self.q_phrases)
        self.searched_keys = [normalize(s.query) for s in searches]
        titles = [d.title for s in searches for d in s.docs]
        self.title_keys = {normalize(t) for t in titles}
        self.topic_keys = {normalize(p) for p in self.q_phrases} | set(self.searched_keys)
        # Per search (latest first), per document: its phrases, with the sentences they occur in.
        self.doc_phrases: list[tuple[int, int, DocView, list[str]]] = [
            (age, rank, doc, extract_phrases(f"{doc.title}. {doc.text}", titles=titles))
            for age, search in enumerate(reversed(searches))
            for rank, doc in enumerate(search.docs)
        ]
        self.order: list[str] = []  # the documents' phrases, first seen first
        self.first_age: dict[str, int] = {}
        for age, _, _, phrases in self.doc_phrases:
            for p in phrases:
                key = normalize(p)
                if key not in self.first_age:
                    self.order.append(p)
                self.first_age[key] = age if key not in self.first_age else min(self.first_age[key], age)
        self._sentences: dict[int, list[tuple[str, str]]] = {}

    def sentences_of(self, doc: DocView) -> list[tuple[str, str]]:
        found = self._sentences.get(id(doc))
        if found is None:
            found = [(s, normalize(s)) for s in split_sentences(f"{doc.title}. {doc.text}")]
            self._sentences[id(doc)] = found
        return found

    def evidence(self, phrase: str) -> Evidence:
        key = normalize(phrase)
        mentions, cue, cue_last = 0, 0.0, 0.0
        in_last = in_top = on_topic = False
        for age, rank, doc, _ in self.doc_phrases:
            hit_doc = False
            for sentence, s_key in self.sentences_of(doc):
                if not _contains(s_key, key):
                    continue
                hit_doc = True
                mentions += f" {s_key} ".count(f" {key} ")
                if self.q_cues:
                    share = len(cue_keys(sentence, exclude=[phrase]) & self.q_cues) / len(self.q_cues)
                    cue = max(cue, share)
                    if age == 0:
                        cue_last = max(cue_last, share)
            if hit_doc:
                in_last |= age == 0
                in_top |= age == 0 and rank == 0
                t_key = normalize(doc.title)
                on_topic |= any(_contains(t_key, k) or _contains(k, t_key) for k in self.topic_keys if k)
        return Evidence(
            in_question=_contains(self.q_key, key),
            is_title=key in self.title_keys,
            searched=any(_contains(s, key) for s in self.searched_keys),
            in_last=in_last,
            in_top_doc=in_top,
            mentions=mentions,
            cue=cue,
            cue_last=cue_last,
            on_topic=on_topic,
            age=self.first_age.get(key, 0),
            words=len(phrase.split()),
        )


def build_candidates(question: str, searches: Sequence[SearchView]) -> CandidateSet:
    """The search and answer candidates of an episode that asked `question` and made `searches`.

    Search candidates: the question's phrases (in order), then the phrases of the documents shown, latest
    search first (titles before text, documents in shown order). Answer candidates: the documents'
    phrases in the same order, then the question's phrases. The whole question as a query is not a
    candidate here; `DiscreteCandidateActions` gives it a fixed slot.
    """
    text = _EpisodeText(question, searches)
    cache: dict[str, Candidate] = {}

    def candidate(phrase: str) -> Candidate:
        key = normalize(phrase)
        if key not in cache:
            cache[key] = Candidate(phrase, text.evidence(phrase))
        return cache[key]

    q_phrases, order = text.q_phrases, text.order
    doc_keys = {normalize(p) for p in order}
    q_keys = {normalize(p) for p in q_phrases}
    search = [candidate(p) for p in q_phrases] + [candidate(p) for p in order if normalize(p) not in q_keys]
    answer = [candidate(p) for p in order] + [candidate(p) for p in q_phrases if normalize(p) not in doc_keys]
    return CandidateSet(tuple(search), tuple(answer))
