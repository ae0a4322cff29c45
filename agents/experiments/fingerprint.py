"""The fingerprint of a reference evaluation: what decides the questions a policy was scored on and how.

The learners benchmark (`agents.experiments.learners`) writes one per seed into `results.json`, next to that seed's
results; `agents.experiments.compare` rebuilds the env from it and refuses to compare when anything differs. It holds

- `env_id` and `make`: the `gym.make` arguments of the evaluation env (world size, hops, split, world seed,
  number of questions, max_turns, top_k, template, ...), enough to rebuild it;
- `eval_questions`: how many of its questions were evaluated (the first ones, greedily);
- `rollout`: the budgets and prompt settings of the rollout engine that ran the episodes (max_turn_tokens,
  max_response_tokens, stop strings, chat template use, ...);
- `setting`: `agents.experiments.eval.env_fingerprint` of the env as built: hashes of its questions, corpus and
  prompt, the retriever's and ranker's descriptions, doc format and answer reward. A rebuilt env whose
  `setting` differs (a changed world generator, another data file) is refused like any other difference;
- `precision`: the precision the evaluation that made the fingerprint computed in (`float32` or `bfloat16`,
  `agents.precision`). Recorded, and checked when asked for (`--fingerprint precision=bfloat16`), but not
  compared when pairing policies (`INFORMATIVE`): it changes float rounding, not the env or its questions,
  so a bfloat16 policy and a float32 one pair question by question.

Keys are compared flattened, joined by dots (`make.top_k`, `rollout.max_turn_tokens`, `setting.corpus.sha256`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from agents.experiments.eval import env_fingerprint
from searchgym.errors import ConfigError

FINGERPRINT_VERSION = 1
"""Bumped when the layout changes; `agents.experiments.compare` refuses other versions."""

ROLLOUT_KEYS = ("max_turn_tokens", "max_response_tokens", "max_obs_tokens", "stop", "system_prompt", "use_chat_template", "stop_on_invalid")
"""The rollout engine settings that change what a greedy policy sees or how long it may write."""

INFORMATIVE = ("precision",)
"""Top-level keys that describe how the policies computed, not the env: left out of `differences`."""

_OBJECT = "__object__"
"""Marks a `gym.make` argument that was a Python object (a judge, a retriever): recorded, not rebuildable."""


def jsonable(value: Any) -> Any:
    """`value` as JSON values (tuples become lists); objects JSON cannot hold become `{"__object__": repr}`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    return {_OBJECT: repr(value)[:200]}


def make_fingerprint(env: gym.Env, *, env_id: str, make: Mapping[str, Any], eval_questions: int, rollout: Any,
                     precision: str | None = None) -> dict[str, Any]:
    """The fingerprint of evaluating the first `eval_questions` questions of `env` (built by
    `gym.make(env_id, **make)`) with the rollout engine settings `rollout` (an `agents.rollout.RolloutConfig`),
    by a policy computing in `precision` (recorded when given)."""
    return {
        "version": FINGERPRINT_VERSION,
        "env_id": env_id,
        "make": jsonable({k: v for k, v in make.items() if k != "cache_dir"}),  # where indexes are cached changes no result
        "eval_questions": int(eval_questions),
        "rollout": jsonable({k: getattr(rollout, k) for k in ROLLOUT_KEYS}),
        "setting": jsonable(env_fingerprint(env)),
        **({"precision": precision} if precision else {}),
    }


def trainer_eval_fingerprint(trainer) -> dict[str, Any]:
    """The fingerprint of `trainer.evaluate()`: its env (the synthetic world's test or validation split, or a
    question file's held-out or training questions, with the learner's env options) and its rollout engine's
    settings."""
    from agents.train import setup

    config = trainer.config
    split = setup.eval_split(config)  # as Trainer.evaluate picks it
    make = setup.env_kwargs(config, split, trainer.out / "cache")
    for key, value in trainer.learner_env_options().items():
        make.setdefault(key, value)  # as Trainer._make_env: the run's own options win
    env = gym.make(config.env.id, **make)
    try:
        return make_fingerprint(env, env_id=config.env.id, make=make, eval_questions=config.eval_questions, rollout=trainer.engine.config,
                                precision=str(trainer.compute_dtype).removeprefix("torch."))
    finally:
        env.close()


def flatten(fingerprint: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"make": {"top_k": 2}}` -> `{"make.top_k": 2}`; lists stay values."""
    out: dict[str, Any] = {}
    for key, value in fingerprint.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and _OBJECT not in value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def differences(reference: Mapping[str, Any], actual: Mapping[str, Any], ignore: tuple[str, ...] = INFORMATIVE) -> list[tuple[str, Any, Any]]:
    """(key, reference value, actual value) for every flattened key whose values differ, sorted by key; keys
    under `ignore` (by default the `INFORMATIVE` ones) are left out."""
    a, b = ({k: v for k, v in flatten(f).items() if k.split(".")[0] not in ignore} for f in (reference, actual))
    missing = object()
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, missing), b.get(key, missing)
        if va != vb:
            out.append((key, None if va is missing else va, None if vb is missing else vb))
    return out


def format_differences(diffs: list[tuple[str, Any, Any]], left: str, right: str) -> str:
    """One line per differing key: `  make.top_k: reference 1, requested 3`."""
    def show(v: Any) -> str:
        text = json.dumps(v, sort_keys=True) if not isinstance(v, str) else repr(v)
        return text if len(text) <= 120 else text[:117] + "..."

    return "\n".join(f"  {key}: {left} {show(a)}, {right} {show(b)}" for key, a, b in diffs)


def parse_requests(pairs: list[str]) -> dict[str, Any]:
    """`KEY=VALUE` strings (VALUE as JSON when it parses, else a string) -> {key: value}."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--fingerprint takes KEY=VALUE (e.g. make.top_k=3 or max_turns=4), got {pair!r}")
        try:
            out[key] = jsonable(json.loads(value))
        except json.JSONDecodeError:
            out[key] = value
    return out


def check_requests(reference: Mapping[str, Any], requests: Mapping[str, Any], source: str) -> None:
    """Refuse (ConfigError naming each key and both values) when the reference's setting is not the requested
    one. A key is a flattened key (`make.top_k`) or its last part (`top_k`, which must then hold for every key
    ending in it); an unknown key is an error that lists the known ones."""
    flat = flatten(reference)
    diffs, unknown = [], []
    for key, wanted in requests.items():
        keys = [key] if key in flat else [k for k in flat if k.rsplit(".", 1)[-1] == key]
        if not keys:
            unknown.append(key)
        diffs += [(k, flat[k], wanted) for k in keys if flat[k] != wanted]
    if unknown:
        raise ConfigError(f"--fingerprint: {source} has no fingerprint key {', '.join(map(repr, unknown))}; its keys are "
                          f"{', '.join(sorted(flat))}")
    if diffs:
        raise ConfigError(f"{source} was evaluated in another setting than the one requested; differing keys:\n"
                          f"{format_differences(diffs, 'reference', 'requested')}")


def env_factory(fingerprint: Mapping[str, Any], *, cache_dir: str | Path | None | bool = None, source: str = "the reference") -> Callable[[], gym.Env]:
    """A function that builds the fingerprinted env again (`cache_dir`: where its retrieval index is cached;
    None is searchgym's default cache, False none)."""
    if fingerprint.get("version") != FINGERPRINT_VERSION:
        raise ConfigError(f"{source}: fingerprint version {fingerprint.get('version')!r}, this is version {FINGERPRINT_VERSION}; "
                          "re-run the learners benchmark (python -m agents.experiments.learners) with this version")
    make = dict(fingerprint["make"])
    objects = sorted(k for k, v in make.items() if isinstance(v, Mapping) and _OBJECT in v)
    if objects:
        raise ConfigError(f"{source}: the evaluation env was built with Python objects for {objects} "
                          f"({', '.join(make[k][_OBJECT] for k in objects)}), which a fingerprint cannot rebuild")
    env_id = fingerprint["env_id"]
    return lambda: gym.make(env_id, cache_dir=cache_dir, **make)
