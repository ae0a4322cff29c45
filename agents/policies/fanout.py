"""`FanOutPolicy`: one `Policy` over several policies that serve the same weights (e.g. SGLang servers).

Each `generate` call deals its prompts round robin over the members, continuing where the previous call
stopped (so one-prompt calls alternate servers too), sends every member its share concurrently, and puts
the completions back in prompt order. A prompt's `n` samples stay on one member, so a GRPO group's first
turn shares one prefill. Weight updates go to every member; `weight_version` is the lowest member's,
so a member that missed an update shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.policies.base import Completion, Policy, SamplingParams, check_budgets
from searchgym.errors import BatchError, ConfigError

if TYPE_CHECKING:
    import torch


class FanOutPolicy:
    """Spreads prompts over `members`; they must share the tokenizer (the first member's is used)."""

    def __init__(self, members: Sequence[Policy]):
        if not members:
            raise ConfigError("FanOutPolicy needs at least one member policy")
        self.members = list(members)
        self.tokenizer = self.members[0].tokenizer
        self.prompts_sent = [0] * len(self.members)
        """Prompts dealt to each member so far."""
        self._next = 0
        self._pool = ThreadPoolExecutor(len(self.members)) if len(self.members) > 1 else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        for m in self.members:
            close = getattr(m, "close", None)
            if close is not None:
                close()

    def assign(self, count: int) -> list[int]:
        """The member index of each of the next `count` prompts (round robin, continuing across calls)."""
        k = len(self.members)
        out = [(self._next + i) % k for i in range(count)]
        self._next = (self._next + count) % k
        return out

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams, *, max_new_tokens: Sequence[int] | None = None
    ) -> list[list[Completion]]:
        budgets = check_budgets(prompts, params, max_new_tokens)
        owners = self.assign(len(prompts))
        shares: dict[int, list[int]] = {}
        for i, m in enumerate(owners):
            shares.setdefault(m, []).append(i)
        for m, rows in shares.items():
            self.prompts_sent[m] += len(rows)

        def run(m: int) -> list[list[Completion]]:
            rows = shares[m]
            return self.members[m].generate([prompts[i] for i in rows], params, max_new_tokens=[budgets[i] for i in rows])

        if self._pool is None or len(shares) == 1:
            answers = {m: run(m) for m in shares}
        else:
            futures = {m: self._pool.submit(run, m) for m in shares}
            answers = {m: f.result() for m, f in futures.items()}  # the first member's error is raised as is
        results: list[list[Completion]] = [[] for _ in prompts]
        for m, rows in shares.items():
            if len(answers[m]) != len(rows):
                raise BatchError(f"member {m} returned {len(answers[m])} completion groups for {len(rows)} prompts")
            for i, group in zip(rows, answers[m]):
                results[i] = group
        return results

    def _each(self, call) -> None:
        if self._pool is None:
            for m in self.members:
                call(m)
            return
        for f in [self._pool.submit(call, m) for m in self.members]:
            f.result()

    def load_weights(self, path: str | Path) -> None:
        """Every member loads the folder (concurrently: each reads it on its own)."""
        self._each(lambda m: m.load_weights(path))

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Every member gets the tensors, one after the other: SGLangPolicy switches torch's process-wide
        tensor sharing strategy while it serializes, which concurrent calls would race on."""
        named = list(named_tensors)  # every member reads the same tensors
        if not named:
            raise ConfigError("update_weights got no tensors")
        for m in self.members:
            m.update_weights(named)

    @property
    def weight_version(self) -> int:
        return min(m.weight_version for m in self.members)

    def describe(self) -> dict[str, Any]:
        return {"policy": "fanout", "members": [m.describe() for m in self.members]}
