"""The multi-turn rollout engine: B questions x G samples over searchgym envs, token-exact.

Each turn, every still-running episode's full token context goes to the policy in one batched call
(the first turn asks for G samples of each group's shared prompt with `n=G`); generation stops at the
action's closing tag (`</search>`, `</answer>`), EOS, or the turn's budget. The sampled text goes to the
episode's env; a returned observation is tokenized on its own and appended with loss mask 0. Finished
episodes are never stepped again. See `agents.rollout.trajectory` for what each trajectory carries.

Observations are appended inline, as Search-R1 does: the agent's turn, the `<information>` block and the
next turn all continue one assistant message of the chat template.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym

from agents.policies.base import Completion, Policy, SamplingParams
from agents.rollout.config import RolloutConfig
from agents.rollout.trajectory import EpisodeEnd, Segment, Trajectory
from searchgym.backends.gather import step_side_by_side
from searchgym.errors import BatchError, ConfigError
from searchgym.info import ResetInfo, StepInfo

logger = logging.getLogger(__name__)

DEFAULT_STOPS: dict[str, tuple[str, ...]] = {"tags": ("</search>", "</answer>"), "tool_calls": ("</tool_call>",)}
"""Stop strings per action grammar (the env protocol's `name`): the closing tag of every action."""


@dataclass
class RolloutTiming:
    """Where one `rollout` call spent its time, and the tokens the policy processed in it."""

    generate_s: float = 0.0
    """Seconds inside `policy.generate` (prefill and decode)."""
    env_s: float = 0.0
    """Seconds inside `env.reset` and `env.step` (parsing, retrieval, ranking, judging, rewards)."""
    total_s: float = 0.0
    sampled_tokens: int = 0
    prefill_tokens: int | None = None
    """Prompt tokens the policy prefilled (None for policies that do not count them, e.g. servers)."""
    reused_tokens: int | None = None
    """Prompt tokens served from kept KV rows instead of a prefill (`HFPolicyConfig.reuse_kv`)."""

    def metrics(self) -> dict[str, float]:
        """`time/generate_s`, `time/env_s`, `perf/sampled_tok_s` and, where counted, `perf/prefill_tok_s`
        and `rollout/reused_tokens`."""
        out = {"time/generate_s": self.generate_s, "time/env_s": self.env_s,
               "perf/sampled_tok_s": self.sampled_tokens / self.generate_s if self.generate_s else 0.0}
        if self.prefill_tokens is not None:
            out["perf/prefill_tok_s"] = self.prefill_tokens / self.generate_s if self.generate_s else 0.0
            out["rollout/prefill_tokens"] = float(self.prefill_tokens)
        if self.reused_tokens is not None:
            out["rollout/reused_tokens"] = float(self.reused_tokens)
        return out


class _Episode:
    """Mutable state of one running episode."""

    def __init__(self, env: gym.Env, group: int, sample: int, prompt_text: str, prompt_ids: list[int], reset_info: ResetInfo):
        self.env, self.group, self.sample = env, group, sample
        self.reset_info = reset_info
        self.ids: list[int] = list(prompt_ids)
        self.mask: list[int] = [0] * len(prompt_ids)
        self.logprobs: list[float] = [0.0] * len(prompt_ids)
        self.segments = [Segment("prompt", 0, len(prompt_ids), prompt_text, -1)]
        self.prompt_len = len(prompt_ids)
        self.infos: list[StepInfo] = []
        self.reward = 0.0
        self.end: EpisodeEnd | None = None
        self.turn = 0
        self.last_text = ""

    @property
    def response_len(self) -> int:
        return len(self.ids) - self.prompt_len

    def add_agent(self, c: Completion) -> None:
        start = len(self.ids)
        self.ids.extend(c.token_ids)
        self.mask.extend([1] * len(c.token_ids))
        self.logprobs.extend(float(x) for x in c.logprobs)
        self.segments.append(Segment("agent", start, len(self.ids), c.text, self.turn, c.finish_reason))
        self.last_text = c.text

    def add_observation(self, ids: list[int], text: str) -> None:
        start = len(self.ids)
        self.ids.extend(ids)
        self.mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))
        self.segments.append(Segment("observation", start, len(self.ids), text, self.turn))


class RolloutEngine:
    """Runs batches of episodes with a `Policy` over envs made by `make_env` (kept and reused).

    >>> make = lambda: gym.make("SearchQA-Synthetic-v0", cache_dir=False)
    >>> engine = RolloutEngine(policy, make, RolloutConfig(group_size=4))  # doctest: +SKIP
    >>> trajectories = engine.rollout([{"seed": 0}, {"options": {"index": 3}}])  # doctest: +SKIP
    """

    def __init__(self, policy: Policy, make_env: Callable[[], gym.Env], config: RolloutConfig | None = None):
        self.policy = policy
        self.make_env = make_env
        self.config = config or RolloutConfig()
        self.tokenizer = policy.tokenizer
        if self.config.use_chat_template and not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError("the tokenizer has no chat template; set one or use RolloutConfig(use_chat_template=False)")
        self._envs: list[gym.Env] = []
        self._calls = 0
        self.timing = RolloutTiming()
        """The last `rollout` call's time split."""
        self._pool = ThreadPoolExecutor(self.config.env_workers) if self.config.env_workers > 1 else None

    def reseed(self, seed: int | None) -> None:
        """Restart the per-call seed sequence from `seed`: a trainer seeds each step by (run seed, step), so
        that a resumed run samples exactly what the uninterrupted one did."""
        self.config = replace(self.config, seed=seed)
        self._calls = 0

    def reserve(self, episodes: int) -> None:
        """Build the envs for `episodes` episodes (B x G) now rather than in the first rollout (building an
        env can take a while: a synthetic world, a retrieval index)."""
        while len(self._envs) < episodes:
            self._envs.append(self.make_env())

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []
        if self._pool is not None:
            self._pool.shutdown()

    # -- public -----------------------------------------------------------------------------------------

    def rollout(self, resets: Sequence[Mapping[str, Any]] | int) -> list[Trajectory]:
        """Run one batch to the end. `resets` holds one `env.reset` keyword mapping (`seed`, `options`) per
        question, or is a number of questions drawn by the envs. Returns B x G trajectories, group-major.

        Questions run in waves of as many as the policy can keep every episode's KV cache for between turns
        (`HFPolicy.episodes_at_once`; all at once for policies that do not say, e.g. servers): past that, an
        in-process policy would prefill most episodes' whole context again every turn, and time and memory
        per question would grow with the number of questions. The envs of one wave are reused by the next."""
        specs = [{}] * resets if isinstance(resets, int) else list(resets)
        if not specs:
            raise ConfigError("rollout needs at least one question")
        for spec in specs:
            if set(spec) - {"seed", "options"}:
                raise ConfigError(f"reset specs take 'seed' and 'options' only, got {sorted(spec)}")
        start = time.perf_counter()
        self.timing = RolloutTiming()
        counts = getattr(self.policy, "stats", None)
        before = counts.copy() if counts is not None else None
        # The first question's prompt sizes the waves: its tokens plus the response budget, per episode.
        first = self._reset(specs[:1])
        size = self._wave_size(len(first[0].ids), len(specs))
        trajectories: list[Trajectory] = []
        for offset in range(0, len(specs), size):
            episodes = (first + self._reset(specs[1:size], offset=1, envs_from=len(first))) if offset == 0 else self._reset(
                specs[offset : offset + size], offset=offset)
            trajectories += self._run(episodes)
        self.timing.total_s = time.perf_counter() - start
        self.timing.sampled_tokens = sum(t.num_sampled_tokens for t in trajectories)
        if before is not None:
            self.timing.prefill_tokens = counts.prefill_tokens - before.prefill_tokens
            self.timing.reused_tokens = counts.reused_tokens - before.reused_tokens
        return trajectories

    def _wave_size(self, prompt_tokens: int, questions: int) -> int:
        """Questions per wave: as many groups as the policy keeps rows for at `prompt_tokens` plus the response
        budget, at least one."""
        fits = getattr(self.policy, "episodes_at_once", None)
        rows = fits(prompt_tokens + self.config.max_response_tokens) if callable(fits) else None
        return questions if rows is None else max(1, min(questions, rows // self.config.group_size))

    def _run(self, episodes: list[_Episode]) -> list[Trajectory]:
        """Every turn of `episodes` (reset), to their end."""
        stops = self._stops(episodes[0].env)
        while running := [e for e in episodes if e.end is None]:
            budgets = [min(self.config.max_turn_tokens, self.config.max_response_tokens - e.response_len) for e in running]
            completions = self._generate(running, budgets, stops)
            to_step = []
            for e, c in zip(running, completions):
                e.add_agent(c)
                if c.finish_reason == "length" and e.response_len >= self.config.max_response_tokens:
                    e.end = "over_long"
                else:
                    to_step.append(e)
            for e, result in zip(to_step, self._step(to_step)):
                self._after_step(e, *result)
        version = self.policy.weight_version
        return [self._trajectory(e, version) for e in episodes]

    # -- steps ------------------------------------------------------------------------------------------

    def _reset(self, specs: list[Mapping[str, Any]], offset: int = 0, envs_from: int = 0) -> list[_Episode]:
        """Episodes of `specs` (questions `offset`, `offset + 1`, ... of the call), on the kept envs from
        `envs_from` on."""
        g_size = self.config.group_size
        self.reserve(envs_from + len(specs) * g_size)
        start = time.perf_counter()
        episodes = []
        for g, spec in enumerate(specs):
            first = envs_from + g * g_size
            obs, info = self._envs[first].reset(seed=spec.get("seed"), options=spec.get("options"))
            prompt_text = self._prompt_text(obs)
            prompt_ids = self.tokenizer.encode(prompt_text, add_special_tokens=False)
            for s in range(g_size):
                env = self._envs[first + s]
                if s > 0:
                    # The other samples of the group must see the same question: ask for it by id.
                    same, info_s = env.reset(seed=spec.get("seed"), options={"question_id": info["question_id"]})
                    if same != obs:
                        raise BatchError(f"env {first + s} did not reproduce question {info['question_id']!r}; make_env must build identical envs")
                    info = info_s
                episodes.append(_Episode(env, offset + g, s, prompt_text, prompt_ids, dict(info)))
        self.timing.env_s += time.perf_counter() - start
        return episodes

    def _prompt_text(self, observation: str) -> str:
        if not self.config.use_chat_template:
            return observation
        messages = [] if self.config.system_prompt is None else [{"role": "system", "content": self.config.system_prompt}]
        messages.append({"role": "user", "content": observation})
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def _stops(self, env: gym.Env) -> tuple[str, ...]:
        if self.config.stop is not None:
            return self.config.stop
        protocol = getattr(env.unwrapped, "protocol", None)
        name = getattr(protocol, "name", "tags")
        if name not in DEFAULT_STOPS:
            raise ConfigError(f"no default stop strings for action grammar {name!r}; set RolloutConfig.stop")
        return DEFAULT_STOPS[name]

    def _generate(self, running: list[_Episode], budgets: list[int], stops: tuple[str, ...]) -> list[Completion]:
        cfg = self.config
        self._calls += 1
        seed = None if cfg.seed is None else cfg.seed * 1_000_003 + self._calls
        first_turn = cfg.group_size > 1 and all(e.turn == 0 for e in running)
        n = cfg.group_size if first_turn else 1
        params = SamplingParams(
            n=n, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k, max_new_tokens=cfg.max_turn_tokens, stop=stops, seed=seed
        )
        start = time.perf_counter()
        if first_turn:  # every episode has just been reset: one prompt per group, G samples each
            heads = running[:: cfg.group_size]
            outs = self.policy.generate([e.ids for e in heads], params, max_new_tokens=budgets[:: cfg.group_size])
        else:
            outs = self.policy.generate([e.ids for e in running], params, max_new_tokens=budgets)
        self.timing.generate_s += time.perf_counter() - start
        flat = [c for group in outs for c in group]
        if len(flat) != len(running) or any(len(group) != n for group in outs):
            raise BatchError(f"the policy returned {len(flat)} completions for {len(running)} episodes")
        logger.debug("turn call %d: %d episodes, %d tokens sampled", self._calls, len(running), sum(len(c.token_ids) for c in flat))
        return flat

    def _step(self, episodes: list[_Episode]) -> list[tuple]:
        start = time.perf_counter()
        if self.config.gather_env_calls and len(episodes) > 1:
            results = step_side_by_side(lambda e: e.env.step(e.last_text), episodes)
        elif self._pool is None or len(episodes) < 2:
            results = [e.env.step(e.last_text) for e in episodes]
        else:
            results = list(self._pool.map(lambda e: e.env.step(e.last_text), episodes))
        self.timing.env_s += time.perf_counter() - start
        return results

    def _after_step(self, e: _Episode, obs: str, reward: float, terminated: bool, truncated: bool, info: dict) -> None:
        e.infos.append(info)
        e.reward += float(reward)
        invalid = bool(info.get("invalid_action", False))
        if terminated:
            e.end = "answered"
        elif truncated:
            e.end = "format_error" if invalid else "out_of_turns"
        elif invalid and self.config.stop_on_invalid:
            e.end = "format_error"
        else:
            ids = self.tokenizer.encode(obs, add_special_tokens=False) if obs else []
            if self.config.max_obs_tokens is not None and len(ids) > self.config.max_obs_tokens:
                ids = ids[: self.config.max_obs_tokens]
                obs = self.tokenizer.decode(ids)
            if e.response_len + len(ids) >= self.config.max_response_tokens:
                e.end = "over_long"  # no room left to write after this observation
            else:
                e.add_observation(ids, obs)
        e.turn += 1

    def _trajectory(self, e: _Episode, version: int) -> Trajectory:
        record = getattr(e.env.unwrapped, "record", None)
        return Trajectory(
            group=e.group,
            sample=e.sample,
            question_id=str(e.reset_info.get("question_id", "")),
            question=getattr(record, "question", None),
            gold_answers=list(getattr(record, "answers", ()) or ()) or None,
            token_ids=e.ids,
            loss_mask=e.mask,
            logprobs=e.logprobs,
            segments=e.segments,
            step_infos=e.infos,
            reset_info=e.reset_info,
            reward=e.reward,
            finish_reason=e.end or "over_long",
            weight_version=version,
        )
