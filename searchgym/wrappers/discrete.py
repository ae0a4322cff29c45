"""`DiscreteCandidateActions`: a text search env as a `Discrete` action space, for classic RL libraries."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from searchgym.errors import ConfigError, EpisodeStateError
from searchgym.wrappers.candidates import Candidate, CandidateSet, build_candidates, normalize
from searchgym.wrappers.episode import EpisodeTracker

logger = logging.getLogger(__name__)

SlotKind = Literal["search", "answer", "noop"]


@dataclass
class DiscreteActionConfig:
    """How many slots of each kind the discrete action space has."""

    search_slots: int = 8
    """Search slots, including the question slot when `question_slot` is on."""
    answer_slots: int = 10
    """Answer slots."""
    question_slot: bool = True
    """Search slot 0 always searches the whole question (a valid action at every turn)."""
    think: bool = True
    """Write a one-line templated `<think>` naming the chosen phrase before each action, so that the env's
    entity matching (which reads the thinking text) sees what the policy acted on."""

    def __post_init__(self) -> None:
        if self.search_slots < 1:
            raise ConfigError(f"search_slots must be >= 1, got {self.search_slots}")
        if self.answer_slots < 1:
            raise ConfigError(f"answer_slots must be >= 1, got {self.answer_slots}")

    @property
    def size(self) -> int:
        return self.search_slots + self.answer_slots


class DiscreteCandidateActions(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """
    ## Description
    Turns the text action of a searchgym env into a choice among candidate actions derived from the
    episode so far, so that a policy over `Discrete(n)` (PPO, DQN, ...) can play it. Observations, rewards,
    `terminated`/`truncated` and the inner env's `info` pass through unchanged; `info["discrete"]` is added.

    ## Action Space
    `Discrete(search_slots + answer_slots)`, rebuilt after every step from the question and the documents
    shown so far (`searchgym.wrappers.candidates.build_candidates`):

    - `0 .. search_slots - 1`: search. With `question_slot` (default), slot 0 searches the whole question;
      the next slots search the question's capitalized phrases, then the phrases of the shown documents
      (latest search first), one phrase per slot.
    - `search_slots .. n - 1`: answer with a phrase of the shown documents (latest search first), then with
      a phrase of the question.
    - A slot with no candidate (fewer phrases than slots) is a **no-op**: the env receives a turn with no
      action (`<think>` only), which it treats as an invalid action (`info["invalid_action"]`, reason
      `no_action`): the turn is spent and the explanation becomes the observation. `action_masks()` marks
      the slots that hold a candidate (the convention of sb3-contrib's `MaskablePPO`).

    The text sent is `<think>Searching for P.</think>` + the grammar's search call (or `<think>The answer is
    P.</think>` + answer call) in the env's grammar (`tags` or `tool_calls`).

    ## Observation Space
    The inner env's (text). Wrap with `HashedFeatureObservation` for a vector.

    ## Info
    The inner env's step info (turn labels, entity matches, reward parts, episode summary) unchanged, plus
    `info["discrete"]`: `slot` (the action taken), `kind` (`search`, `answer` or `noop`), `phrase` (the
    candidate chosen, None for a no-op), `text` (the text action sent) and `candidates` (the search and
    answer phrases of the slots the choice was made from). `reset` adds `info["discrete"]["candidates"]`.

    ## Arguments
    - `env`: a searchgym env (`gym.make("SearchQA-...")`), possibly wrapped.
    - `config`: `DiscreteActionConfig` (slot counts, the question slot, templated thinking).

    ## Example
    >>> import gymnasium as gym, searchgym
    >>> from searchgym.wrappers import DiscreteCandidateActions
    >>> env = DiscreteCandidateActions(gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=1,
    ...                                         num_questions=50, cache_dir=False))
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(1)   # search the question's first phrase
    >>> info["discrete"]["kind"], info["action"]
    ('search', 'search')
    """

    def __init__(self, env: gym.Env, config: DiscreteActionConfig | None = None):
        # Recorded so that `env.spec` can re-create the wrapper (Gymnasium's check_env does).
        gym.utils.RecordConstructorArgs.__init__(self, config=config)
        super().__init__(env)
        self.config = config or DiscreteActionConfig()
        self.tracker = EpisodeTracker(env)
        self._grammar = getattr(self.tracker.base.protocol, "name", None)
        if self._grammar not in ("tags", "tool_calls"):
            raise ConfigError(
                f"DiscreteCandidateActions renders actions in the 'tags' or 'tool_calls' grammar; the env uses "
                f"{self._grammar!r}. Make the env with action_format='tags' or 'tool_calls'"
            )
        self.action_space = gym.spaces.Discrete(self.config.size)
        self.candidates = CandidateSet((), ())
        self._slots: list[tuple[SlotKind, str | None, Candidate | None]] = []

    # -- Gymnasium API ----------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.tracker.reset()
        self._refresh()
        info = dict(info)
        info["discrete"] = {"candidates": self.slot_phrases()}
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        slot = self._check_slot(action)
        kind, phrase, _ = self._slots[slot]
        offered = self.slot_phrases()
        text = self.action_text(kind, phrase, slot)
        obs, reward, terminated, truncated, info = self.env.step(text)
        self.tracker.update(obs, info)
        self._refresh()  # also at the episode's end, so the last observation's features match its slots
        info = dict(info)
        info["discrete"] = {"slot": slot, "kind": kind, "phrase": phrase, "text": text, "candidates": offered}
        return obs, reward, terminated, truncated, info

    # -- slots ------------------------------------------------------------------------------------------

    def action_masks(self) -> np.ndarray:
        """True for each slot that holds a candidate (False: the slot is a no-op)."""
        return np.array([kind != "noop" for kind, _, _ in self._slots], dtype=bool)

    def slot_phrases(self) -> dict[str, list[str | None]]:
        """The phrase in every slot (None: empty), split into search and answer slots."""
        s = self.config.search_slots
        return {"search": [p for _, p, _ in self._slots[:s]], "answer": [p for _, p, _ in self._slots[s:]]}

    def slot_candidates(self) -> list[tuple[SlotKind, str | None, Candidate | None]]:
        """(kind, phrase, candidate) per slot; the question slot has a phrase but no `Candidate`."""
        return list(self._slots)

    def slot_for(self, text_action: str) -> int | None:
        """The slot that best stands for a text action (e.g. a turn of a scripted oracle), or None.

        An answer matches the slot whose phrase equals it after normalization. A search matches the slot
        whose query equals it, else the slot whose phrase is the longest one contained in it (the oracle's
        "NAME KEYWORD" query matches the slot of NAME).
        """
        parsed = self.tracker.base.protocol.parse(text_action)
        s = self.config.search_slots
        if parsed.kind == "answer":
            key = normalize(parsed.answer or "")
            return next((s + j for j, (_, p, _) in enumerate(self._slots[s:]) if p and normalize(p) == key), None)
        if parsed.kind != "search":
            return None
        key = normalize(parsed.query or "")
        best, best_len = None, 0
        for i, (kind, p, _) in enumerate(self._slots[:s]):
            if kind == "noop" or not p:
                continue
            pk = normalize(p)
            if pk == key:
                return i
            if pk and f" {pk} " in f" {key} " and len(pk) > best_len:
                best, best_len = i, len(pk)
        return best

    def action_text(self, kind: SlotKind, phrase: str | None, slot: int) -> str:
        """The text action for a slot, in the env's grammar. (Not `render`, which would hide the env's.)"""
        if kind == "noop" or phrase is None:
            return f"<think>Slot {slot} holds no candidate.</think>"
        think = ""
        if self.config.think:
            think = f"<think>{'Searching for' if kind == 'search' else 'The answer is'} {phrase}.</think>\n"
        if self._grammar == "tags":
            return f"{think}<{kind}>{phrase}</{kind}>"
        key = "query" if kind == "search" else "answer"
        call = json.dumps({"name": kind, "arguments": {key: phrase}}, ensure_ascii=False)
        return f"{think}<tool_call>{call}</tool_call>"

    def _check_slot(self, action: Any) -> int:
        if isinstance(action, np.ndarray) and action.size == 1:
            action = action.item()
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            raise ConfigError(f"the action must be an integer slot in [0, {self.config.size}), got {action!r}")
        if not 0 <= int(action) < self.config.size:
            raise ConfigError(f"the action must be an integer slot in [0, {self.config.size}), got {int(action)}")
        if not self._slots:
            raise EpisodeStateError("step() before reset(): call reset() first")
        return int(action)

    def _refresh(self) -> None:
        cfg = self.config
        self.candidates = build_candidates(self.tracker.question, self.tracker.searches)
        slots: list[tuple[SlotKind, str | None, Candidate | None]] = []
        if cfg.question_slot:
            slots.append(("search", self.tracker.question, None))
        for c in self.candidates.search[: cfg.search_slots - len(slots)]:
            slots.append(("search", c.text, c))
        slots += [("noop", None, None)] * (cfg.search_slots - len(slots))
        answers: list[tuple[SlotKind, str | None, Candidate | None]] = [
            ("answer", c.text, c) for c in self.candidates.answer[: cfg.answer_slots]
        ]
        answers += [("noop", None, None)] * (cfg.answer_slots - len(answers))
        self._slots = slots + answers
        lost_search = len(self.candidates.search) + cfg.question_slot - cfg.search_slots
        lost_answer = len(self.candidates.answer) - cfg.answer_slots
        if lost_search > 0 or lost_answer > 0:
            logger.debug("candidates beyond the slots dropped: %d search, %d answer", max(lost_search, 0),
                         max(lost_answer, 0))
