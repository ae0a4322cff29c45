"""Registers every searchgym environment id with Gymnasium. The registry is touched only here."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from searchgym.errors import RegistrationError

_BENCHMARKS = {
    "HotpotQA": "hotpotqa",
    "NQ": "nq",
    "TriviaQA": "triviaqa",
    "PopQA": "popqa",
    "2Wiki": "2wiki",
    "Musique": "musique",
    "Bamboogle": "bamboogle",
}

ENV_IDS: tuple[str, ...] = (
    *(f"SearchQA-{name}-v0" for name in _BENCHMARKS),
    "SearchQA-Synthetic-v0",
    "SearchQA-Custom-v0",
)


def register_envs() -> None:
    """Register all ids. Safe to call more than once (and on a reload of this module): an id already
    registered with the same entry point and kwargs is left as it is. An id that something else registered
    first, for another entry point or other kwargs, is a `RegistrationError`: `gym.make` would otherwise
    build that other env under a searchgym name without a word."""
    for name, dataset in _BENCHMARKS.items():
        _register(f"SearchQA-{name}-v0", "searchgym.envs.variants:BenchmarkSearchQAEnv", {"dataset": dataset}, "benchmark_vector_env")
    _register("SearchQA-Synthetic-v0", "searchgym.envs.variants:SyntheticSearchQAEnv", {}, "synthetic_vector_env")
    _register("SearchQA-Custom-v0", "searchgym.envs.variants:CustomSearchQAEnv", {}, "custom_vector_env")


def benchmark_id(dataset: str) -> str:
    """The id registered for a benchmark dataset (`hotpotqa` -> `SearchQA-HotpotQA-v0`)."""
    return next(f"SearchQA-{name}-v0" for name, d in _BENCHMARKS.items() if d == dataset)


def _register(env_id: str, entry_point: str, kwargs: dict, vector_entry_point: str) -> None:
    existing = registry.get(env_id)
    if existing is not None:
        if existing.entry_point == entry_point and existing.kwargs == kwargs:
            return
        raise RegistrationError(
            f"{env_id!r} is already in Gymnasium's registry with entry point {existing.entry_point!r} and kwargs "
            f"{existing.kwargs!r}; searchgym registers it with entry point {entry_point!r} and kwargs {kwargs!r}. "
            f"Something imported before searchgym registered the id for another env: register that env under an id "
            f"of its own, or drop it (del gymnasium.registry[{env_id!r}]) before importing searchgym"
        )
    # The env truncates at max_turns itself; a TimeLimit wrapper would duplicate that, so none is added.
    # `gym.make_vec(env_id)` builds a `SearchQAVectorEnv` (one retrieval call per step for all its envs);
    # vectorization_mode="sync" or "async" still gives Gymnasium's own. Entry points are strings, so that
    # `env.spec.to_json()` still works.
    register(id=env_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=False,
             vector_entry_point=f"searchgym.vector:{vector_entry_point}")
