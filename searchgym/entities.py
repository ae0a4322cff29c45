"""Gold-entity matching as E-GRPO defines it.

A gold entity *matches* a text when its normalized form occurs in the normalized text as a whole phrase
(a run of whole words). Normalization (`normalize_entity`): Unicode NFKD with accents dropped, case
folded, every punctuation or symbol character replaced by a space, the articles a/an/the dropped, runs of
whitespace collapsed. Punctuation becomes a space rather than vanishing (SQuAD's answer normalization
deletes it) so that a possessive or a hyphen does not glue words together: "Becquerel's" still contains
"Becquerel", and "Jean-Paul" matches "Jean Paul".

The E-GRPO match rate of a trajectory is gamma = |gold entities matched in the thinking text| / m, where m
counts the distinct non-empty normalized gold entities (two spellings that normalize alike count once; an
entity that normalizes to nothing, such as "The", is dropped). Only the thinking text counts towards gamma;
matches in queries and shown documents are reported for analysis. `relative_rates` is E-GRPO's group
normalization gamma_i / max_j gamma_j.

>>> normalize_entity("The Glass-Meridian's  Author")
'glass meridian s author'
>>> entities_in("Curie's lab was in PARIS.", ["Marie Curie", "Paris", "Curie"])
['Paris', 'Curie']
"""

from __future__ import annotations

import re
import unicodedata
import weakref
from collections.abc import Iterable, Sequence
from functools import lru_cache

from searchgym.corpus import Document
from searchgym.info import EntityMatches

__all__ = [
    "EntityMatcher",
    "PhraseSet",
    "cache_generation",
    "clear_caches",
    "contains_phrase",
    "entities_in",
    "match_rate",
    "normalize_entity",
    "padded",
    "prepare_gold",
    "relative_rates",
]

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_ARTICLES = frozenset({"a", "an", "the"})
# The same for ASCII text, in one bytes.translate pass: upper case to lower case, and every character that
# is not a letter or a digit (punctuation, "_", control characters) to a space. Most corpus text is ASCII,
# and this takes a few microseconds where the Unicode regex takes tens.
_NON_ALNUM = bytes(c for c in range(128) if not chr(c).isalnum())
_UPPER, _LOWER = bytes(range(65, 91)), bytes(range(97, 123))
_ASCII_NON_WORD = bytes.maketrans(_NON_ALNUM + _UPPER, b" " * len(_NON_ALNUM) + _LOWER)
_ASCII_ARTICLES = frozenset(a.encode() for a in _ARTICLES)


@lru_cache(maxsize=16384)
def normalize_entity(text: str) -> str:
    """Accents dropped, case folded, punctuation to spaces, articles dropped, whitespace collapsed.

    Cached: the same documents and gold names are normalized at every step of an episode.
    """
    if text.isascii():
        words = text.encode("ascii").translate(_ASCII_NON_WORD).split()
        return b" ".join([w for w in words if w not in _ASCII_ARTICLES]).decode("ascii")
    decomposed = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    words = _NON_WORD.sub(" ", decomposed.casefold()).split()
    return " ".join([w for w in words if w not in _ARTICLES])


@lru_cache(maxsize=16384)
def padded(text: str) -> str:
    """`normalize_entity(text)` with a space on each side: whole-phrase search is then one substring test,
    `f" {phrase} " in padded(text)`. Padded texts joined together never match across the join."""
    return f" {normalize_entity(text)} "


_DOCUMENTS_REMEMBERED = 512
_TEXTS_REMEMBERED = 8
_PHRASE_SETS: weakref.WeakSet[PhraseSet] = weakref.WeakSet()
"""Every live `PhraseSet`, so that `clear_caches` reaches the documents each remembers."""


_generation = 0
"""How many times `clear_caches` ran: objects built from `prepare_gold` compare it to know theirs is stale."""


def cache_generation() -> int:
    """A number that changes whenever `clear_caches` runs (see `GoldJudge`, which keeps `prepare_gold`'s
    phrase sets: after a clear, the entity matcher gets new ones, and the judge must use the same)."""
    return _generation


def clear_caches() -> None:
    """Forget every cached normalization and remembered document match (for memory, or to time cold runs)."""
    global _generation
    _generation += 1
    normalize_entity.cache_clear()
    padded.cache_clear()
    prepare_gold.cache_clear()
    for phrases in list(_PHRASE_SETS):
        phrases._documents.clear()
        phrases._texts.clear()


def contains_phrase(normalized_text: str, normalized_phrase: str) -> bool:
    """True when the phrase occurs in the text as whole words (both already normalized)."""
    if not normalized_phrase:
        return False
    return f" {normalized_phrase} " in f" {normalized_text} "


def _distinct(gold: Iterable[str]) -> list[tuple[str, str]]:
    """(original, normalized) for each gold entity, first spelling kept, empty normalizations dropped."""
    seen: set[str] = set()
    out = []
    for name in gold:
        norm = normalize_entity(name)
        if norm and norm not in seen:
            seen.add(norm)
            out.append((name, norm))
    return out


def entities_in(text: str, gold: Sequence[str]) -> list[str]:
    """The gold entities (original spelling, gold order, duplicates collapsed) found in `text`."""
    phrases = PhraseSet(norm for _, norm in _distinct(gold))
    names = [name for name, _ in _distinct(gold)]
    return [names[i] for i in phrases.find(text)]


# `_ASCII_NON_WORD` turns an ASCII text into its lower-cased words separated by spaces. What separates two
# words of a phrase there is spaces, and articles among them (normalization drops those).
_ASCII_GAP = re.compile(r" +(?:(?:a|an|the) +)*")


def _ascii_words(phrase: str) -> tuple[str, ...] | None:
    """The words of a normalized phrase, or None when it can never occur in a normalized ASCII text (a
    character other than a-z and 0-9 in a word, an article, a stray space)."""
    words = phrase.split(" ")
    # Each word non-empty, ASCII letters and digits only, lower case, no article: checked on the whole
    # phrase at once (this runs for every name of every question prepared).
    if (phrase.isascii() and phrase == phrase.lower() and "" not in words and "".join(words).isalnum()
            and _ARTICLES.isdisjoint(words)):
        return tuple(words)
    return None


def _occurs(spaced: str, words: tuple[str, ...]) -> bool:
    """Whether `words` occur as a whole phrase in `spaced` (an ASCII text through `_ASCII_NON_WORD`, with
    a space added at each end): from each whole-word occurrence of the first word, the gaps must be what
    normalization makes one space (`_ASCII_GAP`, greedy: an article eaten there is never a phrase word,
    since phrases hold none) and each later word must be a whole word."""
    head = f" {words[0]} "
    start = spaced.find(head)
    while start >= 0:
        pos = start + len(head) - 1
        for w in words[1:]:
            end = _ASCII_GAP.match(spaced, pos).end()  # type: ignore[union-attr]  # spaced[pos] is a space
            if not spaced.startswith(w, end) or spaced[end + len(w)] != " ":
                break
            pos = end + len(w)
        else:
            return True
        start = spaced.find(head, start + 1)
    return False


class PhraseSet:
    """Normalized phrases to look for, as whole phrases, in raw texts.

    An ASCII text is not normalized in full. A phrase can only occur if its longest word occurs in the
    lower-cased text (most documents fail this test); then one `bytes.translate` gives the text's words
    separated by spaces, and the phrase occurs when its words occur there separated by single spaces,
    the usual case, or `_occurs` finds them separated by what normalization collapses (several
    separators, articles). Full normalization costs several microseconds per document, and memory when
    cached; this costs about one and needs no cache, so documents never seen before cost no more. Other
    texts are normalized (`padded`) and searched for the padded phrases.
    """

    def __init__(self, phrases: Iterable[str]):
        self.phrases = tuple([p for p in phrases if p])
        # One plain loop: a phrase set is built for every question an env asks.
        padded_phrases = []
        # For the phrases that can occur in an ASCII text at all: (index, longest word, the phrase with a
        # space at each end, its words when there are several).
        ascii_phrases = []
        for i, p in enumerate(self.phrases):
            pad = f" {p} "
            padded_phrases.append(pad)
            words = _ascii_words(p)
            if words is not None:
                if len(words) == 1:
                    ascii_phrases.append((i, p, pad, None))
                else:
                    ascii_phrases.append((i, max(words, key=len), pad, words))
        self._padded = tuple(padded_phrases)
        self._ascii = tuple(ascii_phrases)
        self._documents: dict[tuple[str, str], tuple[int, ...]] = {}
        self._texts: dict[str, tuple[int, ...]] = {}
        _PHRASE_SETS.add(self)

    def __len__(self) -> int:
        return len(self.phrases)

    def find(self, text: str) -> list[int]:
        """Indices of the phrases that occur in `text` (raw, not normalized), in phrase order."""
        return list(self.indices(text))

    def indices(self, text: str) -> tuple[int, ...]:
        """`find` as a tuple, the one remembered (no copy: the entity matcher and `GoldJudge` call this
        several times per step).

        The last few texts are remembered: within one step the entity matcher and `GoldJudge` look for
        one question's names in the same thinking text and query.
        """
        if not self.phrases or not text:
            return ()
        found = self._texts.get(text)
        if found is None:
            found = tuple(self._scan(text))
            if len(self._texts) >= _TEXTS_REMEMBERED:
                self._texts.clear()
            self._texts[text] = found
        return found

    def find_document(self, title: str, text: str) -> tuple[int, ...]:
        """`indices(f"{title} {text}")`: a document as it is shown, title then body.

        Remembered per phrase set, by the title and text objects (whose hashes Python keeps): the
        rollouts of one question show its documents again and again, and a question's phrase sets are
        kept while it is asked (`prepare_gold`, `GoldJudge`). At most `_DOCUMENTS_REMEMBERED` per set.
        """
        if not self.phrases:
            return ()
        key = (title, text)
        found = self._documents.get(key)
        if found is None:
            found = tuple(self._scan(f"{title} {text}"))
            if len(self._documents) >= _DOCUMENTS_REMEMBERED:
                self._documents.clear()
            self._documents[key] = found
        return found

    def _scan(self, text: str) -> list[int]:
        if text.isascii():
            # Plain loops: this runs several times per step, and a comprehension is one more call.
            low = text.lower()
            found = []
            spaced = None
            for i, probe, pad, words in self._ascii:
                if probe in low:
                    if spaced is None:
                        spaced = f" {text.encode('ascii').translate(_ASCII_NON_WORD).decode('ascii')} "
                    if pad in spaced or (words is not None and _occurs(spaced, words)):
                        found.append(i)
            return found
        norm = padded(text)
        return [i for i, p in enumerate(self._padded) if p in norm]


def match_rate(matched: int, total: int) -> float:
    """gamma = matched / total; 0.0 when there are no gold entities."""
    if total < 0 or matched < 0 or matched > total:
        raise ValueError(f"need 0 <= matched <= total, got matched={matched}, total={total}")
    return matched / total if total else 0.0


def relative_rates(rates: Sequence[float]) -> list[float]:
    """E-GRPO's group normalization: gamma_i / max_j gamma_j, all zeros when the maximum is 0."""
    top = max(rates, default=0.0)
    return [r / top if top > 0 else 0.0 for r in rates]


@lru_cache(maxsize=4096)
def prepare_gold(gold: tuple[str, ...], also: tuple[str, ...] = ()) -> tuple[tuple[str, ...], PhraseSet, int]:
    """The distinct names of `gold` then `also` (first spelling of each normalized form, empty ones
    dropped), the `PhraseSet` of their normalized forms in the same order, and how many of them come
    from `gold` (those come first; a name of `also` that normalizes like a gold one is that one).

    Built once per question, not at every `reset`. A judge that looks for more names than the gold
    entities (`GoldJudge`: titles and answers too) shares one `PhraseSet` with the entity matcher, so
    that each text and shown document of a step is scanned once for both."""
    distinct = _distinct(gold)
    m = len(distinct)
    if also:
        seen = {norm for _, norm in distinct}
        distinct += [(name, norm) for name, norm in _distinct(also) if norm not in seen]
    return tuple(name for name, _ in distinct), PhraseSet(norm for _, norm in distinct), m


class EntityMatcher:
    """Tracks one episode's gold-entity matches, turn by turn.

    `also`: further names to look for in the same scans (they never count as gold entities); see
    `prepare_gold`. `exact=True` matches the thinking text as E-GRPO's paper states, by exact string
    match: a gold name (its first spelling) occurs verbatim, case and punctuation included, anywhere in the
    thinking; queries and documents are still scanned by the normalized rule (they are for analysis).

    >>> m = EntityMatcher(["Rome", "Tiber"])
    >>> m.update("The capital of Italy is Rome.", "Tiber river", ["The Tiber flows through Rome."])["new_in_thinking"]
    ['Rome']
    >>> m.update("So the river is the tiber", None, [])["rate"]
    1.0
    >>> exact = EntityMatcher(["The Who", "Tiber"], exact=True)
    >>> exact.update("I think of who, the band, and the tiber.", None, [])["matched_thinking"]
    []
    >>> exact.update("The Who played near the Tiber.", None, [])["matched_thinking"]
    ['The Who', 'Tiber']
    """

    def __init__(self, gold: Sequence[str], *, also: Sequence[str] = (), exact: bool = False):
        names, self._phrases, m = prepare_gold(tuple(gold), tuple(also))
        self.exact = exact
        self.gold: list[str] = list(names[:m])
        self._matched: set[str] = set()
        self.matched: list[str] = []
        """Gold entities matched in the thinking so far, in the order they were first matched."""

    @property
    def rate(self) -> float:
        return match_rate(len(self.matched), len(self.gold))

    def update(self, thinking: str, query: str | None, docs: Sequence[str | Document]) -> EntityMatches:
        """Record one turn: its thinking text, its query (None for non-search turns) and the shown
        documents: `Document`s (title and text count) or their text. Returns this turn's `EntityMatches`."""
        # Loops rather than comprehensions: this runs at every step, and in Python 3.11 each comprehension
        # is a function call of its own.
        phrases, gold, matched = self._phrases, self.gold, self._matched
        m = len(gold)
        new = []
        if self.exact:
            for name in gold:
                if name not in matched and name in thinking:
                    new.append(name)
        else:
            for i in phrases.indices(thinking):
                if i < m and gold[i] not in matched:
                    new.append(gold[i])
        if new:
            matched.update(new)
            self.matched.extend(new)
        in_docs: set[int] = set()
        for doc in docs:
            found = phrases.indices(doc) if isinstance(doc, str) else phrases.find_document(doc.title, doc.text)
            if found:
                in_docs.update(found)
        in_query = phrases.indices(query) if query else ()
        return {
            "gold": gold.copy(),
            "matched_thinking": self.matched.copy(),
            "new_in_thinking": new,
            "in_query": _pick(gold, in_query) if in_query else [],
            "in_docs": _pick(gold, sorted(in_docs)) if in_docs else [],
            "rate": len(self.matched) / m if m else 0.0,
        }


def _pick(names: list[str], indices: Sequence[int]) -> list[str]:
    """`names` at `indices`, skipping the indices past them (the names a judge shares the scans for)."""
    m = len(names)
    return [names[i] for i in indices if i < m]
