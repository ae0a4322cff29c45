"""`format_valid` and its per-turn parts, against a plain reading of the rules and through the env."""

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from searchgym.envs import SearchQAEnv
from searchgym.rewards import actions_valid, format_valid, turn_action
from tests.envs.test_step_info import BRIDGE, Scripted

PIECES = ["<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<information>", "</information>",
          "x", " ", "<search", "answer>"]
turns = st.lists(st.lists(st.sampled_from(PIECES), max_size=8).map("".join), min_size=1, max_size=4)


def reference(turns):
    """The rules, read literally: in each turn the tags pair up without nesting, none is `<information>`,
    exactly one pair is an action; every turn but the last searches, the last answers."""
    for i, turn in enumerate(turns):
        tags = re.findall(r"<(/?)(think|search|answer|information)>", turn)
        if any(name == "information" for _, name in tags) or len(tags) % 2:
            return False
        pairs = list(zip(tags[::2], tags[1::2]))
        if any(a != ("", n) or b != ("/", n) for a, b in pairs for n in [a[1]]):
            return False
        actions = [a[1] for a, _ in pairs if a[1] != "think"]
        if actions != (["answer"] if i == len(turns) - 1 else ["search"]):
            return False
    return bool(turns)


@settings(max_examples=500, deadline=None)
@given(turns)
@example(["<think>x</think><search>x</search>", "<search>x</search>", "<think>x</think><answer>x</answer><think>"])
@example(["<think>x</think><search>x</search>", "<think>x</think><answer>x</answer>"])
def test_format_valid_follows_the_rules(ts):
    assert format_valid(ts) is reference(ts)
    assert actions_valid(turn_action(t) for t in ts) is reference(ts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES + ["<search>capital of Italy</search>"]), max_size=6).map("".join),
                min_size=1, max_size=4).map(lambda ts: [*ts, "<answer>Tiber</answer>"]))
def test_the_env_reports_format_validity_of_the_turns_it_received(ts):
    env = SearchQAEnv([BRIDGE], retriever=Scripted(), top_k=2, candidates=2, max_turns=8, cache_dir=False)
    env.reset()
    received = []
    for t in ts:
        *_, terminated, truncated, info = env.step(t)
        received.append(t)
        if terminated or truncated:
            break
    assert info["episode"]["format_valid"] == (terminated and format_valid(received))
