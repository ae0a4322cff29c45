"""`HashedFeatureObservation`: a searchgym text episode as a fixed-size float vector.

The feature hasher is a few lines of numpy: each word goes to bucket `crc32(word) % dim` with sign
`+1`/`-1` from another bit of the same hash (the signed hashing trick, as scikit-learn's
`HashingVectorizer` does), and the vector is L2-normalized. crc32 rather than `hash()` because Python
salts `hash()` per process, which would change the features between runs.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from searchgym.errors import ConfigError
from searchgym.wrappers.candidates import Candidate, normalize
from searchgym.wrappers.discrete import DiscreteCandidateActions
from searchgym.wrappers.episode import EpisodeTracker

_WORD = re.compile(r"(?u)\b\w\w+\b")

SLOT_FEATURES: tuple[str, ...] = (
    "valid",
    "in_question",
    "is_title",
    "searched",
    "in_last",
    "in_top_doc",
    "mentions",
    "cue",
    "cue_last",
    "cue_best",
    "on_topic",
    "age",
    "words",
)
"""The per-slot features, in order. `mentions` is min(count, 5) / 5, `age` min(age, 3) / 3, `words`
min(words, 4) / 4; `cue_best` is 1 for the slots (of the same kind, not in the question) whose `cue_last`
is the largest positive one; the rest are `Evidence` fields as 0/1 or shares."""


def _bucket(word: str, dim: int) -> tuple[int, float]:
    h = zlib.crc32(word.encode("utf-8"))
    # The bucket comes from `h % dim`, the sign from bit 31: independent when dim is a power of two < 2**31.
    return h % dim, (1.0 if h >> 31 else -1.0)


def hash_words(words: Iterable[str], dim: int) -> np.ndarray:
    """Signed hashed term counts of `words` in `dim` buckets, L2-normalized (all zeros for no words)."""
    vec = np.zeros(dim, dtype=np.float32)
    for w in words:
        i, sign = _bucket(w, dim)
        vec[i] += sign
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


def text_words(text: str) -> list[str]:
    """Lower-cased words of two or more characters (the tokens `hash_words` is fed)."""
    return _WORD.findall(text.lower())


def slot_feature_row(candidate: Candidate | None, *, cue_best: bool) -> np.ndarray:
    """The `SLOT_FEATURES` of one slot holding `candidate` (zeros for an empty slot)."""
    row = np.zeros(len(SLOT_FEATURES), dtype=np.float32)
    if candidate is None:
        return row
    e = candidate.evidence
    row[:] = (
        1.0,
        e.in_question,
        e.is_title,
        e.searched,
        e.in_last,
        e.in_top_doc,
        min(e.mentions, 5) / 5,
        e.cue,
        e.cue_last,
        cue_best,
        e.on_topic,
        min(e.age, 3) / 3,
        min(e.words, 4) / 4,
    )
    return row


@dataclass
class FeatureConfig:
    """Sizes of the hashed parts of the observation vector."""

    question_dim: int = 64
    """Buckets for the question's words."""
    docs_dim: int = 64
    """Buckets for the words of every document shown so far."""

    def __post_init__(self) -> None:
        for name in ("question_dim", "docs_dim"):
            value = getattr(self, name)
            if not 1 <= value <= 1 << 20:
                raise ConfigError(f"{name} must be in [1, 2**20], got {value}")


class HashedFeatureObservation(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """
    ## Description
    Replaces the text observation of a searchgym env with a fixed-size vector, for policies that take
    vectors (stable-baselines3's `MlpPolicy`). Actions, rewards and `info` pass through unchanged.

    ## Observation Space
    `Box(-1, 1, (n,), float32)`, the concatenation of:

    1. the question's words, hashed (`question_dim`);
    2. the words of every document shown so far, hashed (`docs_dim`);
    3. the turn as a one-hot of `max_turns + 1`;
    4. searches made / `max_turns`, whether the last action was invalid, the shares of search and of
       answer slots that hold a candidate (the last two 0 without slots);
    5. when a `DiscreteCandidateActions` is underneath: for every slot, search slots first, the
       `SLOT_FEATURES` of its candidate (zeros for an empty slot). These relate each candidate to the
       question (in it? in a sentence with the question's cue words?) so that a policy can learn which
       slot to pick; `slot_feature_names()` names every column.

    The question slot (slot 0 of `DiscreteCandidateActions` by default) has `valid`, `in_question` and
    `searched` set. The gold answer is never read.

    ## Arguments
    - `env`: a searchgym env, usually wrapped in `DiscreteCandidateActions`.
    - `config`: `FeatureConfig` (hash sizes).
    """

    def __init__(self, env: gym.Env, config: FeatureConfig | None = None):
        # Recorded so that `env.spec` can re-create the wrapper (Gymnasium's check_env does).
        gym.utils.RecordConstructorArgs.__init__(self, config=config)
        super().__init__(env)
        self.config = config or FeatureConfig()
        self.discrete = _find_discrete(env)
        self.tracker = self.discrete.tracker if self.discrete is not None else EpisodeTracker(env)
        self.max_turns = int(self.tracker.base.max_turns)
        slots = self.discrete.config.size if self.discrete is not None else 0
        self._head = self.config.question_dim + self.config.docs_dim + self.max_turns + 1 + 4
        size = self._head + slots * len(SLOT_FEATURES)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(size,), dtype=np.float32)
        self._question_vec = np.zeros(self.config.question_dim, dtype=np.float32)
        self._docs_vec = np.zeros(self.config.docs_dim, dtype=np.float32)
        self._docs_key: tuple[int, int] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        _, info = self.env.reset(seed=seed, options=options)
        if self.discrete is None:
            self.tracker.reset()
        self._question_vec = hash_words(text_words(self.tracker.question), self.config.question_dim)
        return self.features(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.discrete is None:
            self.tracker.update(obs, info)
        return self.features(), reward, terminated, truncated, info

    def slot_feature_names(self) -> list[str]:
        """Names of the observation's columns after the head: `search3/cue`, `answer0/valid`, ..."""
        if self.discrete is None:
            return []
        s, a = self.discrete.config.search_slots, self.discrete.config.answer_slots
        return [f"{kind}{i}/{f}" for kind, n in (("search", s), ("answer", a)) for i in range(n) for f in SLOT_FEATURES]

    def features(self) -> np.ndarray:
        """The observation vector of the current state."""
        t = self.tracker
        cfg = self.config
        if self._docs_key != (t.episode, len(t.searches)):
            # Documents change only on a search; most steps reuse the vector.
            docs = (f"{d.title} {d.text}" for s in t.searches for d in s.docs)
            self._docs_vec = hash_words((w for text in docs for w in text_words(text)), cfg.docs_dim)
            self._docs_key = (t.episode, len(t.searches))
        doc_vec = self._docs_vec
        turn = np.zeros(self.max_turns + 1, dtype=np.float32)
        turn[min(t.turn, self.max_turns)] = 1.0
        parts = [self._question_vec, doc_vec, turn]
        if self.discrete is None:
            parts.append(np.array([len(t.searches) / self.max_turns, t.last_invalid, 0.0, 0.0], dtype=np.float32))
            return np.clip(np.concatenate(parts), -1.0, 1.0)
        slots = self.discrete.slot_candidates()
        s = self.discrete.config.search_slots
        valid = [kind != "noop" for kind, _, _ in slots]
        parts.append(np.array([min(len(t.searches) / self.max_turns, 1.0), t.last_invalid,
                               np.mean(valid[:s]), np.mean(valid[s:])], dtype=np.float32))
        best = {k: _best_cue([c for _, _, c in slots[lo:hi]]) for k, (lo, hi) in
                (("search", (0, s)), ("answer", (s, len(slots))))}
        searched = {normalize(v.query) for v in t.searches}
        rows = []
        for i, (kind, phrase, cand) in enumerate(slots):
            if kind != "noop" and cand is None:  # the question slot
                row = np.zeros(len(SLOT_FEATURES), dtype=np.float32)
                row[0], row[1], row[3] = 1.0, 1.0, float(normalize(phrase or "") in searched)
            else:
                group = "search" if i < s else "answer"
                is_best = (cand is not None and best[group] > 0 and not cand.evidence.in_question
                           and cand.evidence.cue_last == best[group])
                row = slot_feature_row(cand, cue_best=is_best)
            rows.append(row)
        parts.append(np.concatenate(rows))
        return np.clip(np.concatenate(parts), -1.0, 1.0)


def _best_cue(cands: list[Candidate | None]) -> float:
    values = [c.evidence.cue_last for c in cands if c is not None and not c.evidence.in_question]
    return max(values, default=0.0)


def _find_discrete(env: gym.Env) -> DiscreteCandidateActions | None:
    while isinstance(env, gym.Wrapper):
        if isinstance(env, DiscreteCandidateActions):
            return env
        env = env.env
    return None
