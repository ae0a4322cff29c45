"""The `Policy` protocol: token ids in, sampled token ids with their logprobs out.

Every policy samples from `softmax(logits / temperature)` (greedy when temperature is 0) after optional
top-k / top-p filtering, and reports for each sampled token `log_softmax(logits / temperature)` at that
token, before filtering (plain `log_softmax(logits)` when greedy). This is what SGLang returns in
`meta_info.output_token_logprobs` and what a teacher-forced forward pass of the same weights reproduces,
so learners can compare the sampler's logprobs with their own.

A completion's `token_ids` are every token the policy sampled, including the one that completed a stop
string or the EOS token; its `text` is their decoding (special tokens skipped). Tokens are never trimmed
after sampling: trimming text but not ids (or the reverse) is how multi-turn rollouts drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from searchgym.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

FinishReason = Literal["stop", "length", "abort"]
"""`stop`: EOS or a stop string; `length`: the token budget ran out; `abort`: the server aborted it."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one batch of completions."""

    n: int = 1
    """Completions per prompt."""
    temperature: float = 1.0
    """0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass in (0, 1]; 1 disables it."""
    top_k: int = 0
    """Keep the k most likely tokens; 0 disables it."""
    max_new_tokens: int = 256
    """Tokens per completion at most (a per-prompt budget passed to `generate` can lower it)."""
    stop: tuple[str, ...] = ()
    """Stop strings: generation ends at the token that completes the first of them (kept in the output)."""
    stop_token_ids: tuple[int, ...] | None = None
    """Token ids that end generation; None means the tokenizer's EOS token."""
    seed: int | None = None
    """Seeds the sampler for this call (HF: a local generator; SGLang: `sampling_seed`)."""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError(f"n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not isinstance(self.stop, tuple) or any(not isinstance(s, str) or not s for s in self.stop):
            raise ConfigError(f"stop must be a tuple of non-empty strings, got {self.stop!r}")


@dataclass
class Completion:
    """One sampled continuation of one prompt."""

    token_ids: list[int]
    logprobs: list[float]
    """The sampler's logprob of each token in `token_ids` (see the module docstring)."""
    text: str
    """`token_ids` decoded with special tokens skipped."""
    finish_reason: FinishReason
    matched_stop: str | int | None = None
    """The stop string or stop token id that ended it, when `finish_reason == "stop"`."""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} logprobs")


@runtime_checkable
class Policy(Protocol):
    """A generator of token-level completions whose weights a learner can replace."""

    tokenizer: PreTrainedTokenizerBase
    """The tokenizer the token ids belong to (the rollout applies its chat template)."""

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, max_new_tokens: Sequence[int] | None = None
    ) -> list[list[Completion]]:
        """`params.n` completions for each prompt, in prompt order. `max_new_tokens`, when given, is a
        per-prompt budget (each at most `params.max_new_tokens`). Raises `searchgym.errors.BackendError`
        (or `BackendTimeout`) when a served model fails after its retries."""
        ...

    def load_weights(self, path: str | Path) -> None:
        """Replace the weights with those saved in a model folder (safetensors)."""
        ...

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the weights with the given tensors, named as in the model's `state_dict`."""
        ...

    @property
    def weight_version(self) -> int:
        """How many weight updates this policy has taken (recorded in trajectories)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Model name and settings, for traces and result fingerprints."""
        ...


def resolve_stop_ids(tokenizer: PreTrainedTokenizerBase, params: SamplingParams) -> tuple[int, ...]:
    """The stop token ids of a request: the given ones, or the tokenizer's EOS."""
    if params.stop_token_ids is not None:
        return tuple(params.stop_token_ids)
    eos = tokenizer.eos_token_id
    return () if eos is None else (int(eos),)


def check_budgets(prompts: Sequence[Sequence[int]], params: SamplingParams, max_new_tokens: Sequence[int] | None) -> list[int]:
    """Per-prompt budgets, validated: each in [1, params.max_new_tokens]; every prompt must be non-empty."""
    if any(len(p) == 0 for p in prompts):
        raise ConfigError("every prompt needs at least one token")
    if max_new_tokens is None:
        return [params.max_new_tokens] * len(prompts)
    if len(max_new_tokens) != len(prompts):
        raise ConfigError(f"max_new_tokens has {len(max_new_tokens)} entries for {len(prompts)} prompts")
    budgets = [int(b) for b in max_new_tokens]
    if any(not 1 <= b <= params.max_new_tokens for b in budgets):
        raise ConfigError(f"every per-prompt max_new_tokens must be in [1, {params.max_new_tokens}], got {budgets}")
    return budgets


def find_stop(text_tail: str, stops: Sequence[str]) -> str | None:
    """The stop string present in `text_tail`, if any (the earliest one when several are)."""
    best, best_at = None, -1
    for s in stops:
        at = text_tail.find(s)
        if at >= 0 and (best is None or at < best_at):
            best, best_at = s, at
    return best
