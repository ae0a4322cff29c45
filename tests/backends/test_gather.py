"""`step_side_by_side` and `GatheringBackend`: the calls of steps run side by side go out as one batch per
round, in step order, whatever the threads' timing; replies and errors reach the step that asked."""

from __future__ import annotations

import random
import threading
import time

import pytest

from searchgym.backends.gather import GatheringBackend, step_side_by_side
from searchgym.errors import BackendError


class Recording:
    """Replies `"<conversation's text>@<max_tokens>"`; records every call's conversations and settings."""

    def __init__(self, fail_on: str | None = None):
        self.calls: list[tuple[list[str], int, float]] = []
        self.fail_on = fail_on
        self.threads: set[str] = set()

    def chat(self, conversations, *, max_tokens=512, temperature=0.0):
        texts = [c[-1]["content"] for c in conversations]
        self.calls.append((texts, max_tokens, temperature))
        self.threads.add(threading.current_thread().name)
        if self.fail_on is not None and self.fail_on in texts:
            raise BackendError(f"the model is down ({self.fail_on})")
        return [f"{t}@{max_tokens}" for t in texts]

    def describe(self):
        return {"kind": "recording", "model": "m"}


def ask(backend, *texts, max_tokens=8):
    return backend.chat([[{"role": "user", "content": t}] for t in texts], max_tokens=max_tokens)


def test_each_round_of_calls_is_one_batch_in_step_order():
    inner = Recording()
    backend = GatheringBackend(inner)
    rng = random.Random(0)

    def step(i):
        time.sleep(rng.random() * 0.01)  # shuffle the threads' arrival order
        if i % 3 == 2:
            return f"step {i}: no call"
        first = ask(backend, f"s{i}a", *([f"s{i}b"] if i == 0 else []))
        time.sleep(rng.random() * 0.01)
        second = ask(backend, f"s{i}c") if i % 2 == 0 else []
        return first + second

    for _ in range(5):  # the batches do not depend on which thread arrives first
        inner.calls.clear()
        results = step_side_by_side(step, range(7))
        assert inner.calls == [
            (["s0a", "s0b", "s1a", "s3a", "s4a", "s6a"], 8, 0.0),  # every step's first call (step 0 asks two)
            (["s0c", "s4c", "s6c"], 8, 0.0),  # the second calls, once the first batch's steps waited again
        ]
        assert results == [
            ["s0a@8", "s0b@8", "s0c@8"], ["s1a@8"], "step 2: no call", ["s3a@8"], ["s4a@8", "s4c@8"], "step 5: no call",
            ["s6a@8", "s6c@8"],
        ]
    assert all(name.startswith("step-") for name in inner.threads)


def test_calls_with_other_settings_or_backends_are_separate_batches_of_the_same_round():
    one, two = Recording(), Recording()
    a, b = GatheringBackend(one), GatheringBackend(two)

    def step(i):
        if i == 0:
            return ask(b, "b0")
        return ask(a, f"a{i}", max_tokens=4 if i == 3 else 8)

    assert step_side_by_side(step, range(4)) == [["b0@8"], ["a1@8"], ["a2@8"], ["a3@4"]]
    assert one.calls == [(["a1", "a2"], 8, 0.0), (["a3"], 4, 0.0)]
    assert two.calls == [(["b0"], 8, 0.0)]


def test_a_failed_batch_raises_in_each_caller_and_a_failed_step_after_all_ended():
    inner = Recording(fail_on="s1")
    backend = GatheringBackend(inner)

    def step(i):
        try:
            return ask(backend, f"s{i}")
        except BackendError as e:
            return f"caught: {e}"

    assert step_side_by_side(step, range(3)) == ["caught: the model is down (s1)"] * 3
    assert len(inner.calls) == 1  # one batch, one failure, three callers told

    finished = []

    def raising(i):
        if i == 1:
            raise ValueError("step 1 broke before calling")
        out = ask(GatheringBackend(Recording()), f"s{i}")
        finished.append(i)
        return out

    with pytest.raises(ValueError, match="step 1 broke"):
        step_side_by_side(raising, range(3))
    assert sorted(finished) == [0, 2]  # the others were not left waiting for step 1


def test_outside_step_side_by_side_calls_pass_straight_through():
    inner = Recording()
    backend = GatheringBackend(inner)
    assert ask(backend, "x", "y") == ["x@8", "y@8"]
    assert inner.calls == [(["x", "y"], 8, 0.0)]
    assert backend.describe() == inner.describe()
    assert step_side_by_side(lambda i: i * 2, []) == []
    assert step_side_by_side(lambda i: ask(backend, f"only{i}"), [0]) == [["only0@8"]]
    with pytest.raises(TypeError, match="chat"):
        GatheringBackend(object())
