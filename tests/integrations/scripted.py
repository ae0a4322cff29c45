"""A scripted agent the integration tests share: the same actions go to a framework's env and to the plain
`gym.make` env, and the two transcripts must be equal."""

from __future__ import annotations

from typing import Any

from searchgym.data.records import QARecord

FIXED_ANSWER = "Paris"


def scripted_action(record: QARecord, turn: int, episode: int) -> str:
    """Episode `episode`'s action at `turn`: a search with the question's text first, then by `episode % 4` the
    gold answer (read from the record), an invalid action, a second search naming a gold entity, or a fixed
    answer; out of turns after that when the env's `max_turns` is reached."""
    entity = record.gold_entities[0] if record.gold_entities else record.question
    if turn == 0:
        return f"<think>I need to look up {entity}.</think><search>{record.question}</search>"
    kind = episode % 4
    if kind == 0:
        return f"<think>{entity} leads to the answer.</think><answer>{record.answers[0]}</answer>"
    if kind == 1:
        return "I am not sure what to do next."
    if kind == 2 and turn < 3:
        return f"<think>Now more about {entity}.</think><search>{entity}</search>"
    return f"<think>I will guess.</think><answer>{FIXED_ANSWER}</answer>"


def play(env: Any, seed: int, episode: int, max_steps: int = 10) -> tuple[tuple[str, dict], list[tuple]]:
    """One scripted episode on a plain Gymnasium env: the reset's (observation, info) and each step's
    (action, observation, reward, terminated, truncated, info)."""
    obs, info = env.reset(seed=seed)
    record = env.unwrapped.record
    steps = []
    for turn in range(max_steps):
        action = scripted_action(record, turn, episode)
        out = env.step(action)
        steps.append((action, *out))
        if out[2] or out[3]:
            break
    return (obs, info), steps
