"""The lexical tokenizer shared by every BM25 backend, so that backends differ only in scoring code."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from bm25s.stopwords import STOPWORDS_EN

# The scikit-learn / bm25s default pattern: words of two or more word characters.
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


@dataclass
class Tokenizer:
    """Lowercase, split into words of 2+ characters, drop English stopwords, optionally stem (Snowball)."""

    stem: bool = True
    """Apply the English Snowball stemmer (PyStemmer)."""
    stopwords: frozenset[str] = field(default_factory=lambda: frozenset(STOPWORDS_EN))
    """Words dropped before indexing and querying."""

    def __post_init__(self) -> None:
        self._stemmer = None
        if self.stem:
            import Stemmer

            self._stemmer = Stemmer.Stemmer("english")
            # Stemming dominates tokenization time; corpora repeat words, so memoize per word.
            self._cache: dict[str, str] = {}

    def __getstate__(self) -> dict[str, object]:
        # The stemmer (a C object) does not pickle, and the memo rebuilds itself: the settings are enough.
        return {"stem": self.stem, "stopwords": self.stopwords}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.stem, self.stopwords = state["stem"], state["stopwords"]  # type: ignore[assignment]
        self.__post_init__()

    def __call__(self, text: str) -> list[str]:
        words = [w for w in _TOKEN.findall(text.lower()) if w not in self.stopwords]
        if self._stemmer is None:
            return words
        cache = self._cache
        out = []
        for w in words:
            s = cache.get(w)
            if s is None:
                s = self._stemmer.stemWord(w)
                if len(cache) < 2_000_000:
                    cache[w] = s
            out.append(s)
        return out

    def batch(self, texts: Iterable[str]) -> list[list[str]]:
        return [self(t) for t in texts]

    def describe(self) -> dict[str, object]:
        return {"pattern": _TOKEN.pattern, "stem": "snowball-english" if self.stem else None, "stopwords": len(self.stopwords)}
