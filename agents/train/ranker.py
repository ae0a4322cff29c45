"""COSEARCH's trainable ranker: a policy behind the `ChatBackend` the env's `LLMRanker` calls.

`PolicyChatBackend` samples the ranker's replies with an `agents` policy and remembers, for every reply,
the prompt ids, the sampled ids and their logprobs. After a rollout, `ranker_sequences` matches the
ranker calls recorded in step info (`info["ranker"]`: messages and raw output) to those generations, so
the ranker's GRPO update trains on exactly the tokens that were sampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.policies.base import SamplingParams
from searchgym.errors import BackendError, SearchGymError


@dataclass
class RankerGeneration:
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]


class PolicyChatBackend:
    """A `ChatBackend` that samples with a `Policy` and logs each generation for training."""

    def __init__(self, policy, *, temperature: float = 1.0, max_tokens: int = 96, seed: int | None = None):
        self.policy = policy
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self._calls = 0
        self.log: dict[tuple[str, str], RankerGeneration] = {}

    def chat(self, conversations: Sequence[Sequence[dict]], *, max_tokens: int = 512, temperature: float = 0.0) -> list[str]:
        tok = self.policy.tokenizer
        prompts = [tok.apply_chat_template(list(c), add_generation_prompt=True, tokenize=False) for c in conversations]
        ids = [tok.encode(p, add_special_tokens=False) for p in prompts]
        self._calls += 1
        params = SamplingParams(n=1, temperature=self.temperature, max_new_tokens=min(max_tokens, self.max_tokens), stop=("</rerank>",),
                                seed=None if self.seed is None else self.seed * 7919 + self._calls)
        try:
            outs = self.policy.generate(ids, params)
        except SearchGymError as e:
            raise BackendError(f"ranker policy failed: {e}") from e
        replies = []
        for prompt, prompt_ids, group in zip(prompts, ids, outs):
            c = group[0]
            replies.append(c.text)
            self.log[(prompt, c.text)] = RankerGeneration(prompt_ids + list(c.token_ids), [0] * len(prompt_ids) + [1] * len(c.token_ids), [0.0] * len(prompt_ids) + list(c.logprobs))
        return replies

    def take(self, messages: Sequence[dict], raw_output: str) -> RankerGeneration | None:
        """The logged generation of one recorded call (removed from the log), or None if unknown."""
        prompt = self.policy.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        return self.log.pop((prompt, raw_output), None)

    def clear(self) -> None:
        self.log.clear()

    def describe(self) -> dict[str, Any]:
        return {"kind": "policy", "policy": self.policy.describe(), "temperature": self.temperature}
