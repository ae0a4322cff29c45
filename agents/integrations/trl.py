"""TRL's `GRPOTrainer` on multi-turn searchgym episodes.

TRL 1.x lets a `rollout_func(prompts, trainer) -> dict` replace the trainer's single-turn generation.
`SearchQARollout` is one, built on the project's own rollout engine. Per generation round:

1. TRL's sampler draws rows of `SearchQARollout.dataset()` (one row per env question: the env's own
   reset prompt as a user message, with `question_index` and `question_id` columns) and repeats each
   `num_generations` times.
2. `SearchQARollout` maps each prompt back to its question and runs the episodes with
   `agents.rollout.RolloutEngine` over an `HFPolicy` that shares the trainer's model (no copy: every
   rollout samples the current weights). The prompt goes through the tokenizer's chat template; each turn
   stops at the action's closing tag (`</search>`, `</answer>`), EOS or the turn budget; the env built by
   `make_env` (e.g. `gym.make("SearchQA-Synthetic-v0")`) parses the action and its observation (the
   retrieved documents, or an explanation of an invalid action) is tokenized on its own and appended; the
   episode ends when the agent answers, after the env's `max_turns`, or when TRL's `max_completion_length`
   tokens are used up (`over_long`).
3. TRL receives `prompt_ids`, `completion_ids` (every agent turn and observation after the prompt, in
   order), the sampler's `logprobs`, and `env_mask` (1 = sampled by the policy, 0 = observation). TRL
   multiplies `env_mask` into its completion mask, so observation tokens stay in the forward pass as
   context but count in neither the policy loss, the KL term, the entropy nor `completions/mean_length`.
4. Rewards are TRL reward functions fed by the episodes, which reach them as the `searchgym_trajectory`
   column: `env_reward` (the env's own return: its `answer_reward`, EM by default; it also logs the
   batch's `rollout/*` and `credit/*` metrics: judge labels and gold-entity matches), `reward_part("f1")`
   (one of the env's reward parts on the answering step), `answer_reward("f1")` (any `searchgym.rewards`
   answer metric of the final answer, scored here against the gold answers) and `format_reward`
   (`searchgym.rewards.format_valid`). TRL weighs and sums them and computes the group advantages.

The envs may run in this process (`gym.make(...)`) or on an OpenEnv server
(`searchgym.integrations.openenv.RemoteSearchQAEnv`, one session per env): the rollout reads only what
`reset` and `step` return. A served env keeps its gold answers on the server, so there `answer_reward`
has nothing to score against; `env_reward` and `reward_part` read the env's own numbers and work with both.

An episode the env ended (answered, out of turns, format error) gets the tokenizer's EOS token appended
with `env_mask` 0, so TRL counts it as finished; an `over_long` one does not, so TRL reports it in
`completions/clipped_ratio` and `GRPOConfig(mask_truncated_completions=True)` leaves it out of the loss.

Not supported: `use_vllm=True` (rollouts sample with the trainer's model in-process), TRL's `min_p` and
`repetition_penalty` (the sampler has neither; setting them is an error), multimodal prompts.

The reward functions are in `agents.integrations.trl_rewards` (importable from here too). It lives in `agents`
because it builds on the rollout engine and policies; `searchgym` itself never imports `agents`.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from agents.integrations.trl_rewards import (REWARD_PARTS, TRAJECTORY_FIELD, answer_reward, env_reward, final_answer,
                                             format_reward, reward_part)
from agents.policies.base import Policy
from agents.rollout import RolloutConfig, RolloutEngine, Trajectory, rollout_metrics
from searchgym.errors import BatchError, ConfigError

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

__all__ = ["REWARD_PARTS", "TRAJECTORY_FIELD", "SearchQARollout", "TRLRolloutConfig", "answer_reward", "env_reward",
           "final_answer", "format_reward", "make_grpo_trainer", "reward_part"]

PolicyFactory = Callable[["PreTrainedModel", "PreTrainedTokenizerBase"], Policy]
"""Builds the rollout's policy from the trainer's (unwrapped) model and tokenizer."""


@dataclass(frozen=True)
class TRLRolloutConfig:
    """How `SearchQARollout` runs episodes. Sampling settings (temperature, top-p, top-k) and the episode's
    token budget (`max_completion_length`) come from TRL's `GRPOConfig`."""

    max_turn_tokens: int = 256
    """Tokens the policy may write in one turn (capped by `max_completion_length`)."""
    max_obs_tokens: int | None = None
    """Observations longer than this many tokens are cut to it (None: never)."""
    system_prompt: str | None = None
    """A system message placed before the env's prompt (None: whatever the chat template adds)."""
    use_chat_template: bool = True
    """Wrap the env's prompt in the chat template (the dataset's prompts are then conversational); False
    feeds it raw (plain-text prompts)."""
    stop_on_invalid: bool = False
    """End an episode at its first unparseable action instead of letting the env explain."""
    env_workers: int = 1
    """Threads stepping envs (more than 1 helps with retrieval servers or LLM judges)."""
    max_batch_rows: int = 64
    """Rows decoded together at most by the default in-process policy."""

    def __post_init__(self) -> None:
        if self.max_batch_rows < 1:
            raise ConfigError(f"max_batch_rows must be >= 1, got {self.max_batch_rows}")
        # RolloutConfig checks the fields the two share, with its own messages.
        RolloutConfig(max_turn_tokens=self.max_turn_tokens, max_obs_tokens=self.max_obs_tokens, env_workers=self.env_workers)


class SearchQARollout:
    """TRL `rollout_func` running multi-turn searchgym episodes; also builds the matching dataset.

    `make_env` builds one env per episode (they are kept and reused); every env it builds must hold the
    same questions. `policy_factory(model, tokenizer)` replaces the default in-process `HFPolicy` (for
    example with a served policy that receives the trainer's weights).

    >>> rollout = SearchQARollout(lambda: gym.make("SearchQA-Synthetic-v0", num_entities=300, cache_dir=False))
    >>> trainer = GRPOTrainer(model, reward_funcs=[env_reward], args=args,  # doctest: +SKIP
    ...                       train_dataset=rollout.dataset(), rollout_func=rollout)
    """

    def __init__(self, make_env: Callable[[], gym.Env], config: TRLRolloutConfig | None = None, *, policy_factory: PolicyFactory | None = None):
        self.make_env = make_env
        self.config = config or TRLRolloutConfig()
        self.policy_factory = policy_factory
        self.trajectories: list[Trajectory] = []
        """The episodes of the latest call, in TRL's order (for inspection and logging)."""
        self.seconds = 0.0
        """Wall-clock seconds of the latest call."""
        self._probe: gym.Env | None = None
        self._question_by_prompt: dict[str, str] = {}
        self._indexed = 0
        self._engine: RolloutEngine | None = None
        self._model: Any = None
        self._step: int | None = None
        self._calls_in_step = 0

    # -- the dataset ------------------------------------------------------------------------------------

    def dataset(self, limit: int | None = None) -> Dataset:
        """A `datasets.Dataset` with one row per question of the env (the first `limit`): `prompt` (the env's
        reset observation as a user message, or the raw text when `use_chat_template` is False),
        `question_index` and `question_id`. Questions whose prompt repeats an earlier one are left out
        (the rollout could not tell them apart)."""
        from datasets import Dataset

        if limit is not None and limit < 1:
            raise ConfigError(f"limit must be >= 1 or None, got {limit}")
        count = self._num_questions() if limit is None else min(limit, self._num_questions())
        rows: dict[str, list] = {"prompt": [], "question_index": [], "question_id": []}
        seen: set[str] = set()
        for index in range(count):
            text, question_id = self._index_question(index)
            if text in seen:
                continue
            seen.add(text)
            rows["prompt"].append([{"role": "user", "content": text}] if self.config.use_chat_template else text)
            rows["question_index"].append(index)
            rows["question_id"].append(question_id)
        if len(seen) < count:
            logger.warning("%d of %d questions repeat an earlier question's prompt and were left out", count - len(seen), count)
        return Dataset.from_dict(rows)

    def _probe_env(self) -> gym.Env:
        if self._probe is None:
            self._probe = self.make_env()
        return self._probe

    def _num_questions(self) -> int:
        env = self._probe_env().unwrapped
        # A served env (RemoteSearchQAEnv) keeps its records on the server and says how many it holds.
        count = len(getattr(env, "records", None) or ()) or int(getattr(env, "num_questions", 0) or 0)
        if not count:
            raise ConfigError("make_env must build a searchgym SearchQAEnv, in-process or served (its `records` are the questions)")
        return count

    def _index_question(self, index: int) -> tuple[str, str]:
        obs, info = self._probe_env().reset(options={"index": index})
        question_id = str(info["question_id"])
        self._question_by_prompt.setdefault(obs, question_id)
        return obs, question_id

    def _question_for(self, text: str) -> str:
        """The question id whose reset prompt is `text`; indexes the env's questions on a first miss, so a
        dataset built some other way works too."""
        if text not in self._question_by_prompt:
            while self._indexed < self._num_questions() and text not in self._question_by_prompt:
                self._index_question(self._indexed)
                self._indexed += 1
        if text not in self._question_by_prompt:
            raise BatchError(
                f"prompt {text[-120:]!r} is not the reset prompt of any question of the env; build the dataset with "
                "SearchQARollout.dataset() from an env made like make_env's"
            )
        return self._question_by_prompt[text]

    # -- the rollout ------------------------------------------------------------------------------------

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        """TRL's `rollout_func`: one episode per prompt, in order (TRL repeats each prompt per generation)."""
        if not prompts:
            raise ConfigError("the rollout got no prompts")
        start = time.perf_counter()
        engine = self._engine_for(trainer)
        keys = [_prompt_text(p) for p in prompts]
        question_ids = [self._question_for(k) for k in keys]
        group = _group_size(keys, _num_generations(trainer))
        engine.config = replace(engine.config, group_size=group)
        engine.reseed(self._seed(trainer))
        trajectories = engine.rollout([{"options": {"question_id": q}} for q in question_ids[::group]])
        eos = engine.tokenizer.eos_token_id
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], TRAJECTORY_FIELD: trajectories}
        for key, qid, t in zip(keys, question_ids, trajectories):
            # Chat templates may trim the message, hence strip().
            if t.question_id != qid or key.strip() not in t.segments[0].text:
                raise BatchError(f"the env reset to question {t.question_id!r} for a prompt of {qid!r}; make_env must build identical envs")
            p = t.prompt_length
            completion, mask, logprobs = t.token_ids[p:], t.loss_mask[p:], t.logprobs[p:]
            if t.finish_reason != "over_long" and eos is not None and (not completion or completion[-1] != eos):
                completion, mask, logprobs = [*completion, eos], [*mask, 0], [*logprobs, 0.0]
            out["prompt_ids"].append(t.token_ids[:p])
            out["completion_ids"].append(completion)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
        self.trajectories = trajectories
        self.seconds = time.perf_counter() - start
        logger.debug("rollout: %d episodes, %s", len(trajectories), rollout_metrics(trajectories))
        return out

    def _engine_for(self, trainer: Any) -> RolloutEngine:
        _check_trainer(trainer)
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self._engine is None or self._model is not model:
            from agents.policies.hf import HFPolicy, HFPolicyConfig

            tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
            if self.policy_factory is not None:
                policy = self.policy_factory(model, tokenizer)
            else:
                # float32, as TRL's own forward passes compute the logprobs it compares with the sampler's.
                policy = HFPolicy(model, tokenizer, config=HFPolicyConfig(max_batch_rows=self.config.max_batch_rows, dtype="float32"))
            if not trainer.max_completion_length:
                raise ConfigError("set GRPOConfig(max_completion_length=...): it is the episode's token budget after the prompt")
            budget = int(trainer.max_completion_length)
            cfg = self.config
            rollout_config = RolloutConfig(
                temperature=float(trainer.temperature),
                top_p=float(trainer.top_p),
                top_k=int(trainer.top_k or 0),
                max_turn_tokens=min(cfg.max_turn_tokens, budget),
                max_response_tokens=budget,
                max_obs_tokens=cfg.max_obs_tokens,
                system_prompt=cfg.system_prompt,
                use_chat_template=cfg.use_chat_template,
                stop_on_invalid=cfg.stop_on_invalid,
                env_workers=cfg.env_workers,
            )
            if self._engine is not None:
                self._engine.close()
            self._engine, self._model = RolloutEngine(policy, self.make_env, rollout_config), model
        return self._engine

    def _seed(self, trainer: Any) -> int:
        """A sampling seed per (run seed, optimizer step, call within the step), so that rollouts repeat
        exactly for the same seed and a resumed run samples what the uninterrupted one did."""
        step = int(trainer.state.global_step)
        if step != self._step:
            if self._step is not None:
                mark = getattr(self._engine.policy if self._engine else None, "mark_updated", None)
                if mark is not None:
                    mark()  # the optimizer changed the shared weights since the last rollout
            self._step, self._calls_in_step = step, 0
        self._calls_in_step += 1
        return (int(trainer.args.seed) * 1_000_003 + step) * 101 + self._calls_in_step

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def _check_trainer(trainer: Any) -> None:
    if getattr(trainer, "use_vllm", False):
        raise ConfigError("SearchQARollout samples with the trainer's own model; set GRPOConfig(use_vllm=False)")
    if getattr(trainer, "min_p", None) is not None:
        raise ConfigError("SearchQARollout's sampler has no min_p; leave GRPOConfig(min_p=None)")
    if float(getattr(trainer, "repetition_penalty", 1.0) or 1.0) != 1.0:
        raise ConfigError("SearchQARollout's sampler has no repetition penalty; leave GRPOConfig(repetition_penalty=1.0)")


def _prompt_text(prompt: Any) -> str:
    """The env prompt inside a dataset prompt: the last user message's text, or the string itself."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
                return message["content"]
    raise BatchError(f"a prompt must be a string or a list of chat messages with a text user message, got {prompt!r:.200}")


def _num_generations(trainer: Any) -> int:
    if trainer.model.training:
        return int(trainer.num_generations)
    return int(getattr(trainer, "num_generations_eval", None) or trainer.num_generations)


def _group_size(keys: Sequence[str], g: int) -> int:
    """`g` when the prompts come in runs of `g` copies (TRL's layout on one process), so that each group's
    prompt is prefilled once for its `g` samples; 1 otherwise (e.g. a group split across processes)."""
    if g > 1 and len(keys) % g == 0 and all(keys[i] == keys[i - i % g] for i in range(len(keys))):
        return g
    return 1


# -- a trainer in one call ----------------------------------------------------------------------------------


def make_grpo_trainer(
    model: PreTrainedModel | str,
    tokenizer: PreTrainedTokenizerBase,
    make_env: Callable[[], gym.Env],
    args: Any,
    *,
    rollout: SearchQARollout | None = None,
    reward_funcs: Sequence[Callable[..., list[float]]] | None = None,
    limit: int | None = None,
    callbacks: Sequence[Any] | None = None,
) -> Any:
    """`trl.GRPOTrainer(model, reward_funcs, args, train_dataset=rollout.dataset(limit), rollout_func=rollout)`
    with `rollout = SearchQARollout(make_env)` unless given and `reward_funcs=[env_reward]` unless given.
    The rollout is `trainer.rollout_func`. TRL's warning that `rollout_func` is experimental is silenced."""
    try:
        from trl import GRPOTrainer
    except ImportError as e:
        raise ConfigError('the TRL integration needs TRL 1.x: pip install "searchgym[agents,trl]"') from e
    rollout = rollout or SearchQARollout(make_env)
    if rollout.make_env is not make_env:
        raise ConfigError("rollout was built with a different make_env than the one given")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
        return GRPOTrainer(
            model=model,
            reward_funcs=list(reward_funcs or [env_reward]),
            args=args,
            train_dataset=rollout.dataset(limit),
            processing_class=tokenizer,
            callbacks=list(callbacks or []),
            rollout_func=rollout,
        )
