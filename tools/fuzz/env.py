"""The `env` surface: `SearchQAEnv.step` with arbitrary agent text, in both grammars (tags, tool calls)."""

from __future__ import annotations

import math
from typing import Any, get_args

from hypothesis import strategies as st

from searchgym.corpus import Corpus, Document
from searchgym.data.records import QARecord
from searchgym.protocol import ActionKind
from tools.fuzz.outcomes import TIME_LIMIT_S, InputHang, Outcome, crash, describe_exception, time_limit
from tools.fuzz.strategies import ANY_CHARACTER, RAW_TOKENS, dumps, json_values

_TAG_FRAGMENTS = [
    "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>", "<information>", "</information>",
    "<tool_call>", "</tool_call>", "<tool_response>", "<search><search>", "</search></search>", "<", ">", "</",
    '{"name": "search", "arguments": {"query": ', '{"name": "answer", "arguments": {"answer": ', '"}}',
    '{"name": "search", "arguments": {"query": "Tiber river"}}', '{"name": "answer", "arguments": {"answer": "Rome"}}',
    '{"name": "answer", "arguments": {"answer": 1e999}}', '{"name": "answer", "arguments": {"answer": NaN}}',
    '{"name": ["search"], "arguments": null}', "{", "}", "[", "]", '"', "\\", ":", ",", "null", "true",
    "Rome", "Tiber", "capital of Italy", " ", "\n", "\t", "\x00", "\ud800", "\udfff", "\u202e", "\ufeff", "🜂",
    *RAW_TOKENS,
]


def _fragment_text(max_size: int = 12) -> st.SearchStrategy:
    return st.lists(st.one_of(st.sampled_from(_TAG_FRAGMENTS), st.text(ANY_CHARACTER, max_size=6)),
                    max_size=max_size).map("".join)


@st.composite
def _well_formed_turn(draw) -> str:
    """A turn in one of the grammars' shapes, with fuzzed contents (so searches and answers do happen)."""
    think = draw(st.one_of(st.just(""), _fragment_text().map(lambda t: f"<think>{t}</think>")))
    content = draw(st.one_of(st.sampled_from(["Rome", "Tiber river", "capital of Italy", "Spree"]), _fragment_text(6)))
    shape = draw(st.sampled_from(["search", "answer", "tool_search", "tool_answer"]))
    if shape in ("search", "answer"):
        turn = f"<{shape}>{content}</{shape}>"
    else:
        name, key = ("search", "query") if shape == "tool_search" else ("answer", "answer")
        arguments = draw(st.one_of(st.just(content), st.sampled_from(RAW_TOKENS), json_values(4)))
        turn = "<tool_call>" + dumps({"name": name, "arguments": {key: arguments}}) + "</tool_call>"
    return think + turn + draw(_fragment_text(4))


def agent_actions() -> st.SearchStrategy:
    """What a policy might emit for one turn, and a few things it never should (non-text values)."""
    long = st.builds(lambda piece, n: piece * n, st.sampled_from(_TAG_FRAGMENTS[:12] + ["x", "<search>x", "é "]),
                     st.integers(1_000, 40_000))
    not_text = st.one_of(st.none(), st.integers(), st.binary(max_size=40), st.lists(st.text(max_size=5), max_size=3))
    return st.one_of(_well_formed_turn(), _well_formed_turn(), _fragment_text(40), st.text(ANY_CHARACTER, max_size=60),
                     long, not_text)


def env_cases() -> st.SearchStrategy:
    """(grammar, action) pairs."""
    return st.tuples(st.sampled_from(["tags", "tool_calls"]), agent_actions())


FUZZ_DOCS = [
    Document("d0", "Rome", "Rome is the capital city of Italy and was the centre of the Roman Empire."),
    Document("d1", "Tiber", "The Tiber is the third-longest river in Italy and flows through Rome."),
    Document("d2", "Paris", "Paris is the capital and most populous city of France, on the Seine."),
    Document("d3", "Seine", "The Seine is a river in northern France that flows through Paris."),
    Document("d4", "Berlin", "Berlin is the capital and largest city of Germany."),
    Document("d5", "Spree", "The Spree is a river that flows through Berlin before joining the Havel."),
]
FUZZ_RECORDS = [
    QARecord("q0", "Which river flows through the capital of Italy?", ("Tiber",), gold_entities=("Rome", "Tiber"),
             gold_docs=("d0", "d1"), hops=2, source="fuzz"),
    QARecord("q1", "Which river flows through Berlin?", ("Spree",), gold_entities=("Spree",), gold_docs=("d5",),
             hops=1, source="fuzz"),
]


class EnvHarness:
    """One env per grammar over a six-document corpus, BM25 and the gold judge; an episode is started
    whenever the last one ended."""

    def __init__(self) -> None:
        from searchgym.envs import SearchQAEnv

        corpus = Corpus(FUZZ_DOCS, name="fuzz")
        self.envs = {
            name: SearchQAEnv(FUZZ_RECORDS, corpus, action_format=name, judge="gold", top_k=2, candidates=4,
                              max_turns=4, cache_dir=False)
            for name in ("tags", "tool_calls")
        }
        # One real search and answer first: BM25's numba kernels compile on the first search (seconds).
        for name, env in self.envs.items():
            env.reset(seed=0)
            search, answer = ("<search>Rome river</search>", "<answer>Tiber</answer>") if name == "tags" else (
                '<tool_call>{"name": "search", "arguments": {"query": "Rome river"}}</tool_call>',
                '<tool_call>{"name": "answer", "arguments": {"answer": "Tiber"}}</tool_call>')
            env.step(search)
            env.step(answer)

    def run(self, case: tuple[str, Any]) -> Outcome:
        grammar, action = case
        env = self.envs[grammar]
        if env.done:
            env.reset()
        try:
            with time_limit(TIME_LIMIT_S):
                obs, reward, terminated, truncated, info = env.step(action)
        except InputHang as e:
            return crash(str(e))
        except Exception as e:  # noqa: BLE001 - any exception from step is a crash: bad text is a normal turn
            return crash(describe_exception(e))
        problem = _env_contract(obs, reward, terminated, truncated, info)
        if problem:
            return crash(f"contract: {problem}")
        return Outcome(f"observation:{info['action']}")

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


def _env_contract(obs: Any, reward: Any, terminated: Any, truncated: Any, info: dict) -> str | None:
    if not isinstance(obs, str):
        return f"observation is {type(obs).__name__}, not text"
    if not isinstance(reward, float) or not math.isfinite(reward):
        return f"reward {reward!r} is not a finite float"
    if not isinstance(terminated, bool) or not isinstance(truncated, bool) or (terminated and truncated):
        return f"terminated={terminated!r}, truncated={truncated!r}"
    if info.get("action") not in get_args(ActionKind):
        return f"info['action'] is {info.get('action')!r}"
    if info["invalid_action"] != (info["action"] == "invalid"):
        return "info['invalid_action'] disagrees with info['action']"
    if info["action"] == "invalid" and not obs.strip():
        return "an invalid action got no explanation"
    if (terminated or truncated) and "episode" not in info:
        return "the last step has no episode summary"
    return None
