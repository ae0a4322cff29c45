"""Gather the model calls that env steps make side by side into one batched call per backend.

A COSEARCH ranker or an LLM judge calls its `ChatBackend` from inside `env.step`, one search or one
answer at a time. Stepping B x G envs one after another makes B x G batch-1 model calls per turn; a
model decodes a batch of 32 at several times the tokens per second of one. `step_side_by_side` runs the
steps of one turn in threads, one per env, and a `GatheringBackend` around the ranker's backend holds
each call until every other step has either returned or made a call too; then the held calls go out as
one `chat` of all their conversations, in step order, and each caller gets its own replies.

The batches are the same from run to run: a batch holds exactly the calls made before the steps' next
wait, in step order, whatever the threads' timing, so seeded sampling stays reproducible. A step that
calls twice (a retry) joins the next batch. Outside `step_side_by_side` a `GatheringBackend` passes
every call straight through.

    backend = GatheringBackend(my_backend)  # any ChatBackend
    envs = [gym.make("SearchQA-Synthetic-v0", ranker=LLMRanker(backend)) for _ in range(8)]
    results = step_side_by_side(lambda env: env.step(action), envs)  # the searches' ranker calls: one batch

(a runnable example is in docs/scaling-retrieval.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from searchgym.backends.base import ChatBackend, ChatMessage
from searchgym.errors import BackendError

__all__ = ["GatheringBackend", "step_side_by_side"]

T = TypeVar("T")
R = TypeVar("R")

_local = threading.local()
"""`slot`: the (gather, step index) of the step this thread runs, or None."""


@dataclass
class _Call:
    index: int
    backend: GatheringBackend
    conversations: list[Sequence[ChatMessage]]
    max_tokens: int
    temperature: float
    replies: list[str] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class _Gather:
    """The steps of one `step_side_by_side`: how many are still running, and the calls held."""

    running: int
    held: list[_Call] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)

    def call(self, call: _Call) -> list[str]:
        with self.cond:
            self.held.append(call)
            self.running -= 1
        self._fire_if_all_waiting()
        with self.cond:
            while not call.done:
                self.cond.wait()
        if call.error is not None:
            if isinstance(call.error, BackendError):  # one batch's failure, raised afresh in each caller
                raise BackendError(str(call.error)) from call.error
            raise call.error
        assert call.replies is not None
        return call.replies

    def settle(self) -> None:
        """A step returned (or raised): one fewer to wait for."""
        with self.cond:
            self.running -= 1
        self._fire_if_all_waiting()

    def _fire_if_all_waiting(self) -> None:
        with self.cond:
            if self.running > 0 or not self.held:
                return
            batch, self.held = sorted(self.held, key=lambda c: c.index), []
        # Every other step is waiting or has returned, so this thread runs the batch alone; calls the inner
        # backends make go straight through (no slot), whatever they wrap.
        slot, _local.slot = getattr(_local, "slot", None), None
        try:
            for group in _by_backend_and_settings(batch):
                _run(group)
        finally:
            _local.slot = slot
        with self.cond:
            for call in batch:
                call.done = True
            self.running += len(batch)
            self.cond.notify_all()


def _by_backend_and_settings(batch: list[_Call]) -> list[list[_Call]]:
    groups: dict[tuple[int, int, float], list[_Call]] = {}
    for call in batch:  # in step order, so the groups are in order of their first step
        groups.setdefault((id(call.backend), call.max_tokens, call.temperature), []).append(call)
    return list(groups.values())


def _run(group: list[_Call]) -> None:
    first = group[0]
    conversations = [c for call in group for c in call.conversations]
    try:
        replies = list(first.backend.inner.chat(conversations, max_tokens=first.max_tokens, temperature=first.temperature))
        if len(replies) != len(conversations):
            raise BackendError(f"the backend answered {len(replies)} replies for {len(conversations)} conversations")
    except BaseException as e:  # each caller raises it; the batch's other groups still run
        for call in group:
            call.error = e
        return
    at = 0
    for call in group:
        call.replies, at = replies[at : at + len(call.conversations)], at + len(call.conversations)


class GatheringBackend:
    """A `ChatBackend` whose calls from steps run by `step_side_by_side` are gathered into one batched call
    of `inner` per turn; elsewhere it is `inner`. Its `describe()` is `inner`'s: batching changes how the
    calls are sent, not what is asked."""

    def __init__(self, inner: ChatBackend):
        if not isinstance(inner, ChatBackend):
            raise TypeError(f"inner must have chat(conversations, ...) and describe(); got {type(inner).__name__}")
        self.inner = inner

    def chat(self, conversations: Sequence[Sequence[ChatMessage]], *, max_tokens: int = 512, temperature: float = 0.0) -> list[str]:
        slot = getattr(_local, "slot", None)
        if slot is None or not conversations:
            return list(self.inner.chat(conversations, max_tokens=max_tokens, temperature=temperature))
        gather, index = slot
        return gather.call(_Call(index, self, list(conversations), max_tokens, temperature))

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def step_side_by_side(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`fn(item)` for every item, each in a thread of its own, with the calls that `GatheringBackend`s
    receive inside them gathered (see the module's docstring). Returns the results in item order; if any
    `fn` raised, the first such exception in item order is raised once every thread has ended."""
    items = list(items)
    gather = _Gather(running=len(items))
    results: list[Any] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)

    def run(index: int) -> None:
        _local.slot = (gather, index)
        try:
            results[index] = fn(items[index])
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
            errors[index] = e
        finally:
            _local.slot = None
            gather.settle()

    threads = [threading.Thread(target=run, args=(i,), name=f"step-{i}", daemon=True) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results
