"""Entity names: fictional words from syllables, per-kind name patterns, confusable twins, aliases.

Every name claims its bag-of-words key (`_name_key`), so no two entities share the same set of content
words and a name identifies its entity even to a bag-of-words retriever.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from searchgym.data.synthetic.draws import STREAM_NAMES, Draws, stream_rng
from searchgym.data.synthetic.templates import KIND_TYPE, RELATION_KEYWORDS

# Syllable parts, repeated to weight them: mostly single consonants and plain vowels, a few clusters.
_ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z") * 3 + (
    "br", "dr", "gr", "kr", "tr", "st", "th", "sh", "ch", "vr", "qu", "", "", "", "", "")
_NUCLEI = ("a", "e", "i", "o", "u") * 3 + ("a", "e", "o", "ai", "ei", "ou", "au")
_MEDIAL_CODAS = ("",) * 8 + ("n", "r", "l", "s")
_FINAL_CODAS = ("", "", "", "n", "r", "l", "s", "x", "m", "nd", "rn", "st", "th", "v", "rd", "lt", "sk")
VOWELS = "aeiou"
"""The vowel letters (twin names swap one; `a` or `an` follows one)."""
_BAD_CLUSTER = re.compile(r"[^aeiouy]{3}|[aeiouy]{3}|(.)\1\1|quu|^[^aeiouy]{2}[^aeiouyrlh]")

_CITY_PREFIXES = ("Port", "New", "Fort", "Saint", "Upper", "Lower", "East", "West", "North", "South", "Old",
                  "Mount", "Lake")
_COUNTRY_SUFFIXES = ("ia", "ania", "and", "ora", "esh", "ar", "ovia", "ene", "mark")
_COUNTRY_FORMS = ("Republic", "Kingdom", "Federation", "Commonwealth", "Grand Duchy", "Union")
_ORG_SUFFIXES: dict[str, tuple[str, ...]] = {
    "company": ("Works", "Industries", "Holdings", "Group", "Foundry", "Trading Company", "Mills", "Dynamics",
                "Shipping", "Laboratories", "Manufacturing", "Ironworks"),
    "publisher": ("Press", "House", "Books", "Editions"),
    "studio": ("Pictures", "Studios", "Films", "Cinema"),
    "label": ("Records", "Sound", "Music", "Recordings"),
}
_UNIVERSITY_PATTERNS = ("{A} University", "University of {A}", "{A} Institute of Technology", "{A} College",
                        "{A} Polytechnic")
_ADJECTIVAL_ENDINGS = ("ic", "ian", "ine", "ar", "al")

# English title vocabulary: no stop words, no relation keywords.
_TITLE_ADJECTIVES = (
    "Silent", "Glass", "Hollow", "Crimson", "Distant", "Broken", "Golden", "Winter", "Hidden", "Amber", "Iron",
    "Burning", "Pale", "Wandering", "Sunken", "Forgotten", "Northern", "Velvet", "Bitter", "Endless", "Scarlet",
    "Silver", "Drowned", "Sleeping", "Lonely", "Wild", "Secret", "Ashen", "Emerald", "Shattered", "Twilight",
    "Evening", "Midnight", "Brass", "Marble", "Gentle", "Hungry", "Lucky", "Blind", "Gilded", "Feral", "Woven",
    "Borrowed", "Nameless",
)
_TITLE_NOUNS = (
    "Meridian", "Harbour", "Lantern", "Orchard", "Tide", "Mirror", "Garden", "Tower", "Compass", "Feather", "Ash",
    "Ember", "Atlas", "Voyage", "Shore", "Island", "Window", "Clock", "Letter", "Map", "Storm", "Valley", "Crown",
    "Thread", "Bell", "Shadow", "Circle", "Gate", "Road", "Sparrow", "Raven", "Heron", "Wolf", "Fox", "Lighthouse",
    "Canal", "Carnival", "Orchestra", "Horizon", "Equinox", "Solstice", "Monsoon", "Glacier", "Quarry", "Furnace",
    "Harvest", "Cellar", "Attic", "Balcony", "Tapestry", "Mosaic", "Prism", "Cipher", "Labyrinth", "Pilgrim",
    "Widow", "Cartographer", "Alchemist", "Weaver", "Ferryman", "Orchid", "Comet", "Anchor", "Candle", "Violin",
    "Tunnel", "Meadow", "Willow", "Citadel", "Pendulum", "Beacon", "Chimney", "Lagoon", "Falcon", "Almanac",
    "Ledger", "Serenade",
)
_TITLE_WORDS = frozenset(w.lower() for w in _TITLE_ADJECTIVES + _TITLE_NOUNS)
# Words of names that are not fictional, so a one-vowel twin never mutates them.
_FIXED_NAME_WORDS = frozenset(
    {"The", "of", "University", "Institute", "Technology", "College", "Polytechnic", *_CITY_PREFIXES,
     *_TITLE_ADJECTIVES, *_TITLE_NOUNS,
     *(word for suffixes in _ORG_SUFFIXES.values() for suffix in suffixes for word in suffix.split())}
)

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
# bm25s's English stop words; names are compared without them.
_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
))
_KEYWORDS = frozenset(RELATION_KEYWORDS.values())


def _content_tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def _name_key(name: str) -> str:
    """Names with equal keys are indistinguishable to a bag-of-words retriever."""
    return " ".join(sorted(set(_content_tokens(name))))


# ---------------------------------------------------------------------------------------------------------
# Words and name patterns
# ---------------------------------------------------------------------------------------------------------


class WordSource:
    """Unique, pronounceable fictional words, drawn in batches from a seeded Generator."""

    def __init__(self, rng: np.random.Generator):
        self._rng = rng
        self._seen: set[str] = set()
        self._forbidden = _TITLE_WORDS | _STOPWORDS | _KEYWORDS | {p.lower() for p in _CITY_PREFIXES}

    def take(self, n: int, min_len: int = 4, max_len: int = 8) -> list[str]:
        out: list[str] = []
        while len(out) < n:
            m = int((n - len(out)) * 1.6) + 64
            nsyl = np.where(self._rng.random(m) < 0.72, 2, 3)
            ons = self._rng.integers(0, len(_ONSETS), (m, 3)).tolist()
            nuc = self._rng.integers(0, len(_NUCLEI), (m, 3)).tolist()
            mid = self._rng.integers(0, len(_MEDIAL_CODAS), (m, 3)).tolist()
            fin = self._rng.integers(0, len(_FINAL_CODAS), m).tolist()
            for i in range(m):
                k = int(nsyl[i])
                parts = []
                for s in range(k):
                    coda = _FINAL_CODAS[fin[i]] if s == k - 1 else _MEDIAL_CODAS[mid[i][s]]
                    parts.append(_ONSETS[ons[i][s]] + _NUCLEI[nuc[i][s]] + coda)
                word = "".join(parts)
                if not (min_len <= len(word) <= max_len) or _BAD_CLUSTER.search(word):
                    continue
                if word in self._seen or word in self._forbidden:
                    continue
                self._seen.add(word)
                out.append(word.capitalize())
                if len(out) == n:
                    break
        return out


def _mutate_vowel(word: str, draws: Draws) -> str:
    """`word` with one vowel replaced by another: a near-identical but distinct name token."""
    positions = [i for i, ch in enumerate(word.lower()) if ch in VOWELS]
    if not positions:
        return word
    i = draws.pick(positions)
    old = word[i].lower()
    new = draws.pick([v for v in VOWELS if v != old])
    if word[i].isupper():
        new = new.upper()
    return word[:i] + new + word[i + 1:]


def _claim_name(name: str, keys: set[str]) -> bool:
    """Claim `name`'s bag-of-words key in `keys`; False if it is taken, empty or holds a keyword."""
    key = _name_key(name)
    if not key or key in keys or _KEYWORDS.intersection(key.split()):
        return False
    keys.add(key)
    return True


def draw_names(kind: str, count: int, words: WordSource, rng: np.random.Generator, keys: set[str]) -> list[str]:
    """`count` new unique names for `kind`."""
    out: list[str] = []
    if kind == "person":
        # Limited given-name and surname pools, so surnames are shared as in real families.
        given = words.take(max(30, count // 4 + 10))
        family = words.take(max(30, count // 3 + 10))
        while len(out) < count:
            m = (count - len(out)) * 2 + 16
            gi = rng.integers(0, len(given), m).tolist()
            fi = rng.integers(0, len(family), m).tolist()
            for g, f in zip(gi, fi, strict=True):
                name = f"{given[g]} {family[f]}"
                if _claim_name(name, keys):
                    out.append(name)
                    if len(out) == count:
                        break
        return out
    while len(out) < count:
        m = count - len(out) + 8
        u = rng.random((m, 4)).tolist()
        core = words.take(m)
        extra = words.take(m)
        for i in range(m):
            name = _compose_name(kind, core[i], extra[i], u[i])
            if _claim_name(name, keys):
                out.append(name)
                if len(out) == count:
                    break
    return out


def _compose_name(kind: str, core: str, extra: str, u: list[float]) -> str:
    """A name of `kind` from the fictional words `core` and `extra` and the uniforms `u`."""

    def pick(seq: Sequence[str], x: float) -> str:
        return seq[min(int(x * len(seq)), len(seq) - 1)]

    if kind == "city":
        return f"{pick(_CITY_PREFIXES, u[1])} {core}" if u[0] < 0.3 else core
    if kind == "country":
        suffix = pick(_COUNTRY_SUFFIXES, u[1])
        stem = core[:-1] if core[-1] in VOWELS and suffix[0] in VOWELS else core
        return stem + suffix
    if kind == "company":
        suffix = pick(_ORG_SUFFIXES["company"], u[1])
        if u[0] < 0.5:
            return f"{core} {extra}{pick(_ADJECTIVAL_ENDINGS, u[2])} {suffix}"
        return f"{core} {suffix}"
    if kind == "university":
        return pick(_UNIVERSITY_PATTERNS, u[1]).format(A=core)
    if kind in _ORG_SUFFIXES:
        return f"{core} {pick(_ORG_SUFFIXES[kind], u[1])}"
    # Works: English title patterns, some with a fictional place word.
    adj, noun, noun2 = pick(_TITLE_ADJECTIVES, u[1]), pick(_TITLE_NOUNS, u[2]), pick(_TITLE_NOUNS, u[3])
    pattern = u[0]
    if pattern < 0.3:
        return f"The {adj} {noun}"
    if pattern < 0.55 and noun != noun2:
        return f"{noun} of {noun2}"
    if pattern < 0.8:
        return f"The {noun} of {core}"
    if kind == "album" and pattern < 0.9:
        return core
    return f"{adj} {core}"


def twin_name(kind: str, name: str, draws: Draws, keys: set[str]) -> str | None:
    """A free name confusable with `name`, or None."""
    parts = name.split(" ")
    for _ in range(12):
        cand = list(parts)
        r = draws.uniform()
        if kind == "person" and r < 0.5:
            # Shared surname, different given name (a sibling).
            cand[0] = _mutate_vowel(_mutate_vowel(cand[0], draws), draws)
        elif kind in _ORG_SUFFIXES and kind != "university" and r < 0.5 and len(parts) >= 2:
            # Same name, other suffix ("Orvane Works" / "Orvane Industries").
            suffix = draws.pick(_ORG_SUFFIXES[kind])
            stem = [p for p in parts if not any(p in s.split() for s in _ORG_SUFFIXES[kind])]
            cand = stem + suffix.split()
        elif KIND_TYPE[kind] == "work" and r < 0.6:
            # One title word swapped for another of the same class.
            slots = [i for i, p in enumerate(parts) if p in _TITLE_ADJECTIVES or p in _TITLE_NOUNS]
            if not slots:
                continue
            i = draws.pick(slots)
            cand[i] = draws.pick(_TITLE_ADJECTIVES if parts[i] in _TITLE_ADJECTIVES else _TITLE_NOUNS)
        else:
            # One vowel changed in a fictional word.
            slots = [i for i, p in enumerate(parts) if p not in _FIXED_NAME_WORDS]
            if not slots:
                continue
            i = draws.pick(slots)
            cand[i] = _mutate_vowel(cand[i], draws)
        twin = " ".join(cand)
        if twin != name and _claim_name(twin, keys):
            return twin
    return None


def draw_aliases(seed: int, names: list[str], kinds: list[str], attrs: list[dict[str, Any]],
                  keys: set[str]) -> list[tuple[str, ...]]:
    """Per entity, its aliases: acronyms of long company names, formal names of countries."""
    rng_u = stream_rng(seed, STREAM_NAMES, 1).random(len(names)).tolist()
    proposals: list[str | None] = [None] * len(names)
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        if kind == "company" and len(name.split()) >= 3:
            proposals[i] = "".join(w[0] for w in name.split()).upper()
        elif kind == "country":
            form = _COUNTRY_FORMS[min(int(rng_u[i] * len(_COUNTRY_FORMS)), len(_COUNTRY_FORMS) - 1)]
            proposals[i] = f"{form} of {name}"
            attrs[i]["formal"] = f"{form} of {name}"
    # An alias shared by two entities, or equal to a name, identifies nothing: drop it everywhere.
    counts: dict[str, int] = {}
    for a in proposals:
        if a is not None:
            counts[a] = counts.get(a, 0) + 1
    out: list[tuple[str, ...]] = []
    for i, a in enumerate(proposals):
        if a is None or counts[a] > 1 or (kinds[i] == "company" and _name_key(a) in keys):
            out.append(())
        else:
            out.append((a,))
    return out
