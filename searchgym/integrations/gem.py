"""GEM: every searchgym id as a GEM environment, `gem.make("searchgym:<id>", **gym_make_kwargs)`.

GEM's `Env` is Gymnasium's contract for text: `reset(seed) -> (observation, info)` and `step(text) ->
(observation, reward, terminated, truncated, info)`, with strings for observations and actions. ROLL and Oat
take GEM envs by id (`gem.make`, `gem.make_vec`), so importing this module (which registers the ids) is all
they need. `SearchGymGemEnv` holds a `gym.make(id, **kwargs)` env and passes every call through unchanged:
the observation (the reset prompt, the retrieved documents, an invalid action's explanation, "" after an
answer), the reward, the two flags and the whole info (labels, entities, candidate pool, reward parts, the
episode summary on the last step) are the plain env's, value for value.

How GEM's contract is met without breaking searchgym's:

- `terminated` and `truncated` keep their meanings and are never both True: terminated when the agent
  answers, truncated when the turns run out. (GEM's own single-turn QA env returns both True on every step;
  that is not copied: a learner that bootstraps on truncation would be told two things at once.)
- No swallowed keyword arguments: the constructor takes `searchgym_id`, `seed` and the env's own `gym.make`
  keywords, which searchgym's env checks (a misspelled one is a `TypeError` naming the accepted ones), where
  GEM's `QaEnv(**_)` drops what it does not know.
- No global seeding: GEM's base `reset` seeds Python's and NumPy's global generators; this env never
  calls it. `reset(seed)` seeds the env's own generator as `gym.Env.reset` does. The constructor's `seed`
  (what `gem.make_vec(..., seed=s)` passes, `s + i` for env i) is the seed of the first `reset()` that
  names none, so a vector of envs starts on distinct, reproducible questions.
- `reset(seed, options=None)`: GEM calls `reset(seed)`; `options` (`{"index": i}` or `{"question_id": id}`)
  is searchgym's, for callers that pick the question.

What GEM's tools receive: its `ObservationWrapper` ("concat", "concat_chat", ...) builds the multi-turn
context from these observations (searchgym's info has none of the keys it reads: `prefix`, `suffix`,
`use_tool`, `parsed_action`); its `EpisodeTrackingWrapper` adds its counters to the info. GEM's own
`search_tool` wrapper is not for this env: searchgym does the searching itself.

Not carried: GEM's vector envs (`gem.make_vec`) autoreset in the same step, returning the next episode's
prompt and reset info in place of the ending step's observation and info, so there the last step's labels
and `info["episode"]` do not reach the caller (its reward and flags do). Read them one env at a time
(`gem.make`), or from the env's `unwrapped.turn_infos` before the reset. A non-text action, a 1 MB one or
unknown tags are the env's ordinary invalid step; `step` after the end raises `EpisodeStateError`, as the
plain env does.
"""

from __future__ import annotations

import logging
from typing import Any

import gem
import gymnasium as gym

import searchgym
from searchgym.errors import ConfigError

logger = logging.getLogger(__name__)

PREFIX = "searchgym:"
"""GEM ids are `searchgym:<searchgym id>`, e.g. `searchgym:SearchQA-HotpotQA-v0`."""


class SearchGymGemEnv(gem.Env):
    """A searchgym env on GEM's `Env` API (module docstring: the contract, seeding, what is not carried)."""

    def __init__(self, searchgym_id: str = "SearchQA-Synthetic-v0", *, seed: int | None = None, **env_kwargs: Any):
        super().__init__()
        if searchgym_id not in searchgym.ENV_IDS:
            raise ConfigError(f"unknown searchgym id {searchgym_id!r}; choose one of {list(searchgym.ENV_IDS)}")
        # Not `env_id`: GEM's make sets that attribute to the GEM id (`searchgym:<id>`) after construction.
        self.searchgym_id, self.env_kwargs = searchgym_id, dict(env_kwargs)
        self.env = gym.make(searchgym_id, **env_kwargs)
        self._first_seed = seed
        """The seed of the first `reset()` that names none (GEM's `make_vec` passes `seed + i`)."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if seed is None and self._first_seed is not None:
            seed = self._first_seed
        self._first_seed = None
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.env.step(action)

    def sample_random_action(self) -> str:
        """A random string from the env's action space (searchgym's `UnicodeText`): almost always an invalid
        action, which is what a random agent's baseline should be."""
        return self.env.action_space.sample()

    @property
    def record(self):
        """The question of the episode running (`QARecord`; its answers are the env's, never shown)."""
        return self.env.unwrapped.record

    def close(self) -> None:
        self.env.close()


def register() -> None:
    """Register `searchgym:<id>` with GEM for every searchgym id (done when this module is imported; safe to
    repeat)."""
    from gem.envs.registration import ENV_REGISTRY

    for env_id in searchgym.ENV_IDS:
        if PREFIX + env_id not in ENV_REGISTRY:
            gem.register(PREFIX + env_id, entry_point=f"{__name__}:SearchGymGemEnv", searchgym_id=env_id)


register()
