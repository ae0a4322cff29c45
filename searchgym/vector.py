"""Many searchgym episodes stepped at once: `step_batch` and `SearchQAVectorEnv`.

Gymnasium's own vector envs take searchgym's text spaces: `gym.make_vec(id, num_envs=N,
vectorization_mode="sync")` (`SyncVectorEnv`) and `"async"` with `vector_kwargs={"shared_memory": False}`
(`AsyncVectorEnv`, one process per env; its shared memory writes text through the space's charset, which
has no space character, so observations must go through its pipes) return a tuple of N observation strings
and arrays of rewards and flags. But they merge the step infos with `VectorEnv._add_info`, which types each key by the first env's
value, and that fails on a step where the envs' infos differ in kind: an env answering beside one
searching (its `labels` hold None where the other's hold 0 or 1, its `candidates` None where the other's is
a dict) raises `TypeError` or `AttributeError` inside Gymnasium. They work for steps whose infos agree (the
resets, a step where every env searches); for training, use `SearchQAVectorEnv`, whose merge
(`merge_infos`) gives the same arrays where `_add_info` works and defined ones where it fails.

This module adds a step of many episodes that does the retrieval of all of them in one call:

- `step_batch(envs, actions)` steps many `SearchQAEnv`s: it parses every action, sends the searches of the
  envs that share a retriever and pool size to that retriever in one `search(queries, k)` call (an identical
  query once: a GRPO group's rollouts often search the same words), then finishes each env's step with its
  pool. The results equal `[env.step(a) for env, a in zip(envs, actions)]`. A retriever that fails raises
  before any env has changed, so the same `step_batch` can be called again.
- `SearchQAVectorEnv` is a `gymnasium.vector.VectorEnv` over N envs of one id that steps them with
  `step_batch`. It is every registered id's `vector_entry_point`, so `gym.make_vec(id, num_envs=N)` (no
  `vectorization_mode`, or `"vector_entry_point"`) returns one; its envs share one retriever, built once.
  `vectorization_mode="sync"` or `"async"` still gives Gymnasium's own, and is what `wrappers=` needs.

Autoreset (`autoreset_mode`, Gymnasium's https://farama.org/Vector-Autoreset-Mode), as `SyncVectorEnv`:

- `NEXT_STEP` (the default): the step after an env's episode ends resets that env instead of stepping it:
  its action is ignored, and it returns the new episode's prompt, reward 0, both flags False and the reset
  info. So the step that ends an episode carries its `info["episode"]` summary.
- `SAME_STEP`: the step that ends an episode resets the env at once and returns the new prompt and reset
  info; the ended episode's last observation and info are in `infos["final_obs"]` and `infos["final_info"]`.
- `DISABLED`: no reset; stepping an env whose episode is over raises `EpisodeStateError`. Reset some envs
  with `reset(options={"reset_mask": mask})`.

Infos (`info_format`): `"dict"` merges them as `SyncVectorEnv` does (byte for byte the same structure);
`"list"` returns a list of each env's own info dict, unmerged, which is what an LLM trainer reading
per-episode labels and entities wants and skips the merging's cost (Gymnasium's vector wrappers expect the
dict form).

>>> import gymnasium as gym, searchgym
>>> venv = gym.make_vec("SearchQA-Synthetic-v0", num_envs=2, num_entities=300, cache_dir=False)
>>> obs, infos = venv.reset(seed=0)
>>> obs, rewards, terminated, truncated, infos = venv.step(["<search>capital</search>", "<answer>Paris</answer>"])
>>> infos["action"].tolist(), terminated.tolist()
(['search', 'answer'], [False, True])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal, get_args

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from searchgym.envs.search_qa import SearchQAEnv
from searchgym.errors import BatchError, ConfigError, RetrievalError
from searchgym.protocol import Action
from searchgym.retrieval import Hit

logger = logging.getLogger(__name__)

InfoFormat = Literal["dict", "list"]
StepResult = tuple[str, float, bool, bool, dict[str, Any]]

# The wrappers `gym.make` adds on its own: they check call order and the first outputs, and change nothing.
_CHECKING_WRAPPERS = ("OrderEnforcing", "PassiveEnvChecker")


def base_env(env: gym.Env) -> SearchQAEnv:
    """The `SearchQAEnv` inside `env` (as `gym.make` returns it), refusing wrappers that change actions,
    observations or rewards: a batched step runs the base env's own step and would skip theirs."""
    inner = env
    while isinstance(inner, gym.Wrapper):
        if type(inner).__name__ not in _CHECKING_WRAPPERS:
            raise ConfigError(f"{type(inner).__name__} wraps the env: a batched step runs SearchQAEnv's own step and would "
                              "skip the wrapper's; step wrapped envs one by one (or use gym.make_vec(..., vectorization_mode='sync'))")
        inner = inner.env
    if not isinstance(inner, SearchQAEnv):
        raise ConfigError(f"a batched step needs searchgym envs (SearchQAEnv), got {type(inner).__name__}")
    return inner


def retrieve_pools(envs: Sequence[SearchQAEnv], parsed: Sequence[Action]) -> list[list[Hit] | None]:
    """The candidate pool of each search in `parsed` (None for other actions): one `search` call per retriever
    and pool size, each distinct query once."""
    pools: list[list[Hit] | None] = [None] * len(envs)
    groups: dict[tuple[int, int], tuple[Any, int, dict[str, list[int]]]] = {}
    for i, (env, action) in enumerate(zip(envs, parsed)):
        if action.kind == "search":
            key = (id(env.retriever), env.candidates)
            group = groups.get(key)
            if group is None:
                group = groups[key] = (env.retriever, env.candidates, {})
            group[2].setdefault(action.query or "", []).append(i)
    for retriever, k, by_query in groups.values():
        queries = list(by_query)
        hits = retriever.search(queries, k)
        if len(hits) != len(queries):
            raise RetrievalError(f"the retriever answered {len(hits)} of {len(queries)} queries: a Retriever returns one list per query")
        for query, row in zip(queries, hits):
            first, *others = by_query[query]
            pools[first] = row
            for i in others:
                pools[i] = list(row)  # the ranker of each env gets a list of its own
    return pools


def step_batch(envs: Sequence[gym.Env], actions: Sequence[Any]) -> list[StepResult]:
    """One step of each env, its retrieval batched: equal to `[env.step(a) for env, a in zip(envs, actions)]`.

    Every env must be running an episode (`EpisodeStateError` otherwise, before any env changes).
    """
    if len(envs) != len(actions):
        raise BatchError(f"{len(envs)} envs but {len(actions)} actions: one action per env")
    bases = [base_env(e) for e in envs]
    parsed = [env.parse_action(a) for env, a in zip(bases, actions)]
    pools = retrieve_pools(bases, parsed)
    return [env.apply_action(a, p, pool) for env, a, p, pool in zip(bases, actions, parsed, pools)]


class SearchQAVectorEnv(gym.vector.VectorEnv):
    """N searchgym envs stepped together, their retrieval batched (module docstring: autoreset and infos).

    Make one with `gym.make_vec(id, num_envs=N, **env_kwargs)` or `SearchQAVectorEnv.from_id(id, N)`, or
    from envs you made (`SearchQAVectorEnv(envs)`: those sharing a retriever object search in one call).
    """

    def __init__(self, envs: Sequence[gym.Env], *, autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                 info_format: InfoFormat = "dict"):
        if not envs:
            raise ConfigError("SearchQAVectorEnv needs at least one env")
        if info_format not in get_args(InfoFormat):
            raise ConfigError(f"info_format must be one of {get_args(InfoFormat)}, got {info_format!r}")
        try:
            self.autoreset_mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ConfigError(f"autoreset_mode must be one of {[m.value for m in AutoresetMode]}, got {autoreset_mode!r}") from None
        self.envs = [base_env(e) for e in envs]
        self.info_format = info_format
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.metadata = {**first.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, dtype=np.bool_)
        self._obs: list[str] = [""] * self.num_envs

    @classmethod
    def from_id(cls, env_id: str, num_envs: int = 1, *, autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                info_format: InfoFormat = "dict", **env_kwargs: Any) -> SearchQAVectorEnv:
        """`num_envs` envs of `gym.make(env_id, **env_kwargs)`. Unless `retriever` is an object already, the first
        env builds the retriever (and its index) and the others use that one."""
        if num_envs < 1:
            raise ConfigError(f"num_envs must be >= 1, got {num_envs}")
        first = gym.make(env_id, **env_kwargs)
        shared = dict(env_kwargs)
        if isinstance(env_kwargs.get("retriever", "bm25"), str):
            shared["retriever"] = base_env(first).retriever
        envs = [first, *(gym.make(env_id, **shared) for _ in range(num_envs - 1))]
        return cls(envs, autoreset_mode=autoreset_mode, info_format=info_format)

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], Any]:
        seeds = _seeds(seed, self.num_envs)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            mask = np.ones(self.num_envs, dtype=np.bool_)
        elif not (isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (self.num_envs,) and mask.any()):
            raise ConfigError(f"options['reset_mask'] must be a numpy bool array of shape ({self.num_envs},) with a True value")
        infos = self._new_infos()
        for i in np.flatnonzero(mask).tolist():
            self._obs[i], infos[i] = self.envs[i].reset(seed=seeds[i], options=options or None)
            self._autoreset[i] = False
        return tuple(self._obs), self._infos(infos)

    def step(self, actions: Sequence[Any]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, Any]:
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise BatchError(f"{len(actions)} actions for {self.num_envs} envs: one action per env")
        next_step = self.autoreset_mode is AutoresetMode.NEXT_STEP
        stepping = [i for i in range(self.num_envs) if not (next_step and self._autoreset[i])]
        # Everything that can fail (a finished episode, the retriever) happens before any env changes.
        parsed = {i: self.envs[i].parse_action(actions[i]) for i in stepping}
        pools = dict(zip(stepping, retrieve_pools([self.envs[i] for i in stepping], [parsed[i] for i in stepping])))
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos = self._new_infos()
        for i, env in enumerate(self.envs):
            if i not in parsed:
                obs, info = env.reset()
            else:
                obs, rewards[i], terminated[i], truncated[i], info = env.apply_action(actions[i], parsed[i], pools[i])
                if self.autoreset_mode is AutoresetMode.SAME_STEP and (terminated[i] or truncated[i]):
                    final = {"final_obs": obs, "final_info": info}
                    obs, info = env.reset()
                    info = {**info, **final}
            self._obs[i], infos[i] = obs, info
        self._autoreset = terminated | truncated
        return tuple(self._obs), rewards, terminated, truncated, self._infos(infos)

    def render(self) -> tuple[Any, ...]:
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()

    def _new_infos(self) -> list[dict[str, Any] | None]:
        return [None] * self.num_envs

    def _infos(self, infos: list[dict[str, Any] | None]) -> Any:
        if self.info_format == "list":
            return [{} if info is None else info for info in infos]
        return merge_infos(infos, self.num_envs)


def merge_infos(infos: Sequence[dict[str, Any] | None], num_envs: int) -> dict[str, Any]:
    """Gymnasium's vector-info form of per-env infos (None: that env has none): each key maps to an array over
    the envs, with a bool mask `_key` of the envs that have it, and a dict value is merged the same way, one
    level down. Where every env's value of a key has one type, the result is what Gymnasium's
    `VectorEnv._add_info` builds. Unlike it, mixed types are defined: a key that is a dict in some envs and None
    in others is merged over the dicts (its mask is False where the value is None), and numbers mixed with
    None or with other types go into an object array (`_add_info` fails on both: an answering env's labels
    hold None where a searching env's hold 0 or 1)."""
    out: dict[str, Any] = {}
    keys = dict.fromkeys(k for info in infos if info is not None for k in info)
    for key in keys:
        rows = [i for i, info in enumerate(infos) if info is not None and key in info]
        values = [infos[i][key] for i in rows]  # type: ignore[index]
        kinds = {type(v) for v in values}
        mask = np.zeros(num_envs, dtype=np.bool_)
        if key != "final_obs" and dict in kinds and kinds <= {dict, type(None)}:
            sub: list[dict[str, Any] | None] = [None] * num_envs
            for i, v in zip(rows, values):
                if v is not None:
                    sub[i], mask[i] = v, True
            out[key], out[f"_{key}"] = merge_infos(sub, num_envs), mask
            continue
        out[key] = _leaf_array(values, rows, num_envs, kinds, key == "final_obs")
        mask[rows] = True
        out[f"_{key}"] = mask
    return out


def _leaf_array(values: list[Any], rows: list[int], num_envs: int, kinds: set[type], objects: bool) -> np.ndarray:
    kind = next(iter(kinds))
    if not objects and len(kinds) == 1 and (kind in (int, float, bool) or issubclass(kind, np.number)):
        array = np.zeros(num_envs, dtype=kind)
        array[rows] = values
        return array
    if not objects and len(kinds) == 1 and kind is np.ndarray and len({v.shape for v in values}) == 1:
        array = np.zeros((num_envs, *values[0].shape), dtype=values[0].dtype)
    else:
        array = np.full(num_envs, fill_value=None, dtype=object)
    for i, v in zip(rows, values):
        array[i] = v
    return array


def _seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(n)]
    seeds = list(seed)
    if len(seeds) != n:
        raise ConfigError(f"reset got {len(seeds)} seeds for {n} envs: pass one seed per env, an int (seed + i each), or None")
    return seeds


# The registered ids' `vector_entry_point`s: Gymnasium passes `num_envs` and every kwarg (the spec's own,
# the vector env's `autoreset_mode` and `info_format` among the env's) to the one of the id's family.

def synthetic_vector_env(num_envs: int = 1, **kwargs: Any) -> SearchQAVectorEnv:
    return SearchQAVectorEnv.from_id("SearchQA-Synthetic-v0", num_envs, **kwargs)


def custom_vector_env(num_envs: int = 1, **kwargs: Any) -> SearchQAVectorEnv:
    return SearchQAVectorEnv.from_id("SearchQA-Custom-v0", num_envs, **kwargs)


def benchmark_vector_env(num_envs: int = 1, *, dataset: str, **kwargs: Any) -> SearchQAVectorEnv:
    """`dataset` is the spec's own kwarg (`hotpotqa`, ...), which names the id; `gym.make` adds it back."""
    from searchgym.envs.registration import benchmark_id

    return SearchQAVectorEnv.from_id(benchmark_id(dataset), num_envs, **kwargs)
