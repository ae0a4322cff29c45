"""`SearchGymAgentLoop`: verl's agent loop (`AgentLoopBase`) playing one searchgym episode per sample.

verl's `AgentLoopWorker` makes the loop by name from `agent_loops.yaml` (`actor_rollout_ref.rollout.agent.
agent_loop_config_path`) for each row whose `agent_name` is `searchgym_agent`, and awaits `run(sampling_params,
**row)`. One episode, token in, token out:

1. The row's `extra_info` (written by `searchgym.integrations.verl.prepare`) names the env (`searchgym_id`,
   `env_kwargs`) and the question (`question_id`); an env comes from this process's pool for that id and
   those kwargs and is reset on that question. The prompt is the row's system messages (if any) and the
   env's reset prompt as the user message, tokenized with verl's Continuous Token builder (the chat
   template with the generation prompt).
2. Each turn the server manager generates from the whole context, stopping at the action's closing tag
   (`stop`, with the backend's switch that keeps the stop string in the output: vLLM's
   `include_stop_str_in_output`, SGLang's `no_stop_trim`) or at the turn's token budget. Those tokens get
   response mask 1 and their log-probabilities; their text goes to `env.step` (in a thread, so the event loop
   serves other episodes meanwhile).
3. The observation (the retrieved documents, or the explanation of an invalid action) is tokenized on its
   own and appended inline, as Search-R1 does, with mask 0. The episode ends when the env ends it (answer,
   or out of turns) or when verl's `response_length` is used up.

The output (`AgentLoopOutput`) carries:

- `reward_score`: the episode's return (the env's reward: its `answer_reward`, EM by default; 0 for an
  episode that ran out of tokens before the env ended it). verl then skips its reward function for these
  rows and places the score on the last response token (`rm_scores`).
- `extra_fields["turn_scores"]`: the env's reward of each step (verl's per-turn field);
- `extra_fields["reward_extra_info"]`: the episode's numbers (`searchgym/em`, `f1`, `answered`, `finished`,
  `searches`, `invalid_actions`, `format_valid`, `labelled_rounds`, `contributing_rounds`, `entity_rate`,
  `gold_entities`; the same keys for every row), which verl puts in the batch (`reward_extra_keys`), its
  rollout dumps and its validation metrics (`val-aux/<data_source>/searchgym/em/mean@N`, ...);
- `extra_fields["searchgym_step_infos"]`: every step's info as the env returned it (labels, entities,
  candidate pool ids and scores, shown documents, reward parts, the episode summary on the last step);
- `extra_fields["searchgym_turn_spans"]`: each agent turn's `[start, end)` in the response tokens, so a
  custom advantage estimator can weigh rounds (CW-GRPO) from the labels above;
- `extra_fields["searchgym_reset_info"]`: the reset info (question id, hops, ...).

verl turns every extra field into a column of the batch's `non_tensor_batch` (an object array, one entry per
sample), where advantage estimators and reward managers can read them.

Not carried: verl's single `reward_score` per sample is the episode's return, placed on the last token;
per-turn rewards reach the batch as `turn_scores` but verl's built-in GRPO does not use them. A non-text
completion cannot happen (the loop decodes tokens); a long one or unknown tags are the env's ordinary invalid
step.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

import numpy as np
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from searchgym.errors import ConfigError
from searchgym.integrations._common import shared_pool
from searchgym.integrations.verl.prepare import AGENT_NAME

logger = logging.getLogger(__name__)

STOP_SWITCHES = {"vllm": {"include_stop_str_in_output": True}, "sglang": {"no_stop_trim": True}}
"""Per rollout backend (`actor_rollout_ref.rollout.name`), the sampling setting that keeps the stop string in
the output (the env parses the closing tag). Other backends get no stop strings and generate to EOS or the
turn budget; the env parses the first action and ignores the rest."""
STOPS = {"tags": ["</search>", "</answer>"], "tool_calls": ["</tool_call>"]}


@register(AGENT_NAME)
class SearchGymAgentLoop(AgentLoopBase):
    """One searchgym episode per sample (module docstring). `max_turn_tokens`: tokens one turn may write
    (None: what is left of `response_length`); `stop`: stop strings (None: the closing tags of the env's
    action grammar; `[]`: none)."""

    def __init__(self, *args: Any, max_turn_tokens: int | None = None, stop: list[str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if max_turn_tokens is not None and max_turn_tokens < 1:
            raise ConfigError(f"max_turn_tokens must be >= 1 or None, got {max_turn_tokens}")
        self.max_turn_tokens = max_turn_tokens
        self.stop = None if stop is None else list(stop)
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        env_id, env_kwargs, question_id = episode_of(kwargs.get("extra_info"))
        pool = shared_pool(env_id, env_kwargs)
        env = await self.loop.run_in_executor(None, pool.acquire)
        try:
            return await self._play(env, sampling_params, question_id, list(kwargs.get("raw_prompt") or []))
        finally:
            pool.release(env)

    async def _play(self, env, sampling_params: dict[str, Any], question_id: str, raw_prompt: list) -> AgentLoopOutput:
        observation, reset_info = env.reset(options={"question_id": question_id})
        messages = [*(m for m in raw_prompt if m.get("role") == "system"), {"role": "user", "content": observation}]
        prompt_ids = await self.ct_build_initial_tokens(messages)
        ids, mask, logprobs, has_logprobs = list(prompt_ids), [], [], True
        rewards, infos, spans = [], [], []
        params = {**sampling_params, **self._stop_params(env)}
        timing = {"generate": 0.0, "env": 0.0}
        request_id = uuid4().hex
        while len(mask) < self.response_length:
            left = self.response_length - len(mask)
            start = time.perf_counter()
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                     sampling_params={**params, "max_tokens": min(left, self.max_turn_tokens or left)})
            timing["generate"] += time.perf_counter() - start
            tokens = list(out.token_ids)[:left]
            has_logprobs = has_logprobs and out.log_probs is not None
            spans.append([len(mask), len(mask) + len(tokens)])
            ids += tokens
            mask += [1] * len(tokens)
            logprobs += list(out.log_probs or [])[: len(tokens)] if has_logprobs else []
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            start = time.perf_counter()
            observation, reward, terminated, truncated, info = await self.loop.run_in_executor(None, env.step, text)
            timing["env"] += time.perf_counter() - start
            rewards.append(float(reward))
            infos.append(info)
            if terminated or truncated:
                break
            obs_ids = self.tokenizer.encode(observation, add_special_tokens=False)[: self.response_length - len(mask)]
            ids += obs_ids
            mask += [0] * len(obs_ids)
            logprobs += [0.0] * len(obs_ids)
        finished = bool(infos) and "episode" in infos[-1]
        return AgentLoopOutput(
            prompt_ids=list(prompt_ids),
            response_ids=ids[len(prompt_ids):],
            response_mask=mask,
            response_logprobs=logprobs if has_logprobs and logprobs else None,
            reward_score=float(sum(rewards)),
            num_turns=1 + len(infos) + (len(infos) - 1 if finished else len(infos)),
            metrics=AgentLoopMetrics(generate_sequences=timing["generate"], tool_calls=timing["env"]),
            extra_fields={
                "turn_scores": rewards,
                "reward_extra_info": episode_numbers(env.unwrapped, finished),
                "searchgym_step_infos": infos,
                "searchgym_turn_spans": spans,
                "searchgym_reset_info": reset_info,
            },
        )

    def _stop_params(self, env) -> dict[str, Any]:
        stop = self.stop if self.stop is not None else STOPS.get(env.unwrapped.protocol.name, [])
        switch = STOP_SWITCHES.get(str(self.rollout_config.name))
        if not stop or switch is None:
            return {}
        return {"stop": list(stop), **switch}


def episode_of(extra_info: Any) -> tuple[str, dict[str, Any], str]:
    """(searchgym id, `gym.make` kwargs, question id) from a row's `extra_info`."""
    extra = dict(extra_info or {})
    missing = [k for k in ("searchgym_id", "env_kwargs", "question_id") if extra.get(k) in (None, "")]
    if missing:
        raise ConfigError(f"the row's extra_info lacks {missing}: write the data with "
                          "`python -m searchgym.integrations.verl.prepare --id ID --out DIR`")
    kwargs = extra["env_kwargs"]
    return str(extra["searchgym_id"]), (json.loads(kwargs) if isinstance(kwargs, str) else dict(kwargs)), str(extra["question_id"])


def episode_numbers(env, finished: bool) -> dict[str, float]:
    """The episode's numbers for verl's `reward_extra_info`: the same keys for every row (verl stacks each
    key over the batch), 0 where an episode that ran out of tokens has no value."""
    infos = env.turn_infos
    summary: Mapping[str, Any] = infos[-1]["episode"] if finished else {}
    labels = [t for t in summary.get("turn_labels", []) if t is not None and t.get("contribution") is not None]
    rate = summary.get("entity_rate")
    return {
        "searchgym/em": float(summary.get("em", 0.0)),
        "searchgym/f1": float(summary.get("f1", 0.0)),
        "searchgym/answered": float(summary.get("outcome") == "answered"),
        "searchgym/finished": float(finished),
        "searchgym/searches": float(sum(i["action"] == "search" for i in infos)),
        "searchgym/invalid_actions": float(sum(i["invalid_action"] for i in infos)),
        "searchgym/format_valid": float(bool(summary.get("format_valid", False))),
        "searchgym/labelled_rounds": float(len(labels)),
        "searchgym/contributing_rounds": float(np.sum([t["contribution"] for t in labels])) if labels else 0.0,
        "searchgym/entity_rate": 0.0 if rate is None else float(rate),
        "searchgym/gold_entities": float(len(env.record.gold_entities)) if env.record is not None else 0.0,
    }
