"""The rollout engine's episode logic, driven by a scripted policy over the 10-document corpus."""

from __future__ import annotations

import re
from typing import ClassVar

import gymnasium as gym
import pytest

from agents.rollout import RolloutConfig, RolloutEngine, rollout_metrics
from searchgym.errors import ConfigError

SEARCH = "<think>I should look it up.</think><search>river Rome</search>"
ANSWER = "<think>Found it.</think><answer>Tiber</answer>"


def search_then_answer(context: str, k: int) -> str:
    return ANSWER if "<information>Doc" in context else SEARCH


def test_search_then_answer(make_env, scripted, ten_doc_corpus):
    policy = scripted(search_then_answer)
    engine = RolloutEngine(policy, make_env(), RolloutConfig(group_size=2))
    trajectories = engine.rollout([{"options": {"index": 0}}])
    for t in trajectories:
        assert t.finish_reason == "answered" and t.reward == 1.0 and t.format_valid
        assert [s.kind for s in t.segments] == ["prompt", "agent", "observation", "agent"]
        assert t.agent_texts == [SEARCH, ANSWER]
        assert [i["action"] for i in t.step_infos] == ["search", "answer"]
        # The observation segment is exactly what the env rendered for the documents it showed.
        obs = next(s for s in t.segments if s.kind == "observation")
        shown = [ten_doc_corpus.get(d["id"]) for d in t.step_infos[0]["shown"]]
        assert obs.text == engine._envs[0].unwrapped.protocol.render_documents(shown)
        assert all(m == 0 for m in t.loss_mask[obs.start : obs.end])
        assert t.rounds == [(t.segments[1].start, t.segments[1].end), (t.segments[3].start, t.segments[3].end)]
        assert t.question_id == "q0" and t.gold_answers == ["Tiber"] and t.question.startswith("Which river")
    # First turn: one prompt with n=2; second turn: one prompt per running episode.
    assert policy.calls == [(1, 2), (2, 1)]


def test_generation_stops_at_the_closing_tag(make_env, scripted):
    policy = scripted(lambda ctx, k: SEARCH + " and then more text <answer>x</answer>")
    t = RolloutEngine(policy, make_env(max_turns=1), RolloutConfig()).rollout([{"options": {"index": 0}}])[0]
    assert t.agent_texts == [SEARCH]
    assert t.segments[1].finish == "stop"


def test_out_of_turns_and_format_error(make_env, scripted):
    always_search = RolloutEngine(scripted(lambda ctx, k: SEARCH), make_env(max_turns=2), RolloutConfig())
    t = always_search.rollout([{"options": {"index": 1}}])[0]
    assert t.finish_reason == "out_of_turns" and t.reward == 0.0 and t.num_turns == 2
    # The last turn ended the episode: no observation after it.
    assert [s.kind for s in t.segments] == ["prompt", "agent", "observation", "agent"]

    babble = RolloutEngine(scripted(lambda ctx, k: "I am not sure what to do."), make_env(max_turns=3), RolloutConfig())
    t = babble.rollout([{"options": {"index": 1}}])[0]
    assert t.finish_reason == "format_error" and t.num_turns == 3
    assert all(i["invalid_action"] for i in t.step_infos)
    obs = [s.text for s in t.segments if s.kind == "observation"]
    assert len(obs) == 2 and all("invalid" in o for o in obs)

    strict = RolloutEngine(scripted(lambda ctx, k: "I am not sure."), make_env(max_turns=3), RolloutConfig(stop_on_invalid=True))
    t = strict.rollout([{"options": {"index": 1}}])[0]
    assert t.finish_reason == "format_error" and t.num_turns == 1 and len(t.segments) == 2


def test_over_long_when_the_episode_budget_runs_out(make_env, scripted):
    long_text = "<think>" + "very long reasoning " * 40
    engine = RolloutEngine(scripted(lambda ctx, k: long_text), make_env(), RolloutConfig(max_turn_tokens=500, max_response_tokens=30))
    t = engine.rollout([{"options": {"index": 0}}])[0]
    assert t.finish_reason == "over_long"
    assert len(t.token_ids) - t.prompt_length == 30 == t.num_sampled_tokens
    assert t.step_infos == []  # the env never saw the cut-off text
    assert t.reward == 0.0 and not t.format_valid


def test_over_long_when_the_observation_does_not_fit(make_env, scripted):
    engine = RolloutEngine(scripted(lambda ctx, k: SEARCH), make_env(), RolloutConfig(max_response_tokens=60))
    t = engine.rollout([{"options": {"index": 0}}])[0]
    assert t.finish_reason == "over_long"
    assert [s.kind for s in t.segments] == ["prompt", "agent"]
    assert len(t.step_infos) == 1 and t.step_infos[0]["action"] == "search"


def test_turn_budget_cuts_a_turn_and_the_env_judges_it(make_env, scripted):
    engine = RolloutEngine(scripted(lambda ctx, k: SEARCH), make_env(max_turns=1), RolloutConfig(max_turn_tokens=4))
    t = engine.rollout([{"options": {"index": 0}}])[0]
    assert t.num_sampled_tokens == 4 and t.segments[1].finish == "length"
    assert t.step_infos[0]["invalid_action"] and t.finish_reason == "format_error"


def test_long_observations_are_cut_to_max_obs_tokens(make_env, scripted, tiny):
    _, tok = tiny
    engine = RolloutEngine(scripted(search_then_answer), make_env(), RolloutConfig(max_obs_tokens=7))
    t = engine.rollout([{"options": {"index": 0}}])[0]
    obs = next(s for s in t.segments if s.kind == "observation")
    assert obs.end - obs.start == 7
    assert tok.encode(obs.text, add_special_tokens=False) == t.token_ids[obs.start : obs.end]


class CountingEnv(gym.Wrapper):
    steps: ClassVar[list[int]] = []

    def step(self, action):
        CountingEnv.steps.append(id(self))
        return super().step(action)


def test_only_running_episodes_are_stepped(make_env, scripted):
    """Samples end at different turns; finished ones are never stepped again (the env would raise)."""
    CountingEnv.steps = []
    base = make_env(max_turns=4)

    def script(ctx: str, k: int) -> str:
        # Sample k plans k searches on its first turn (the only turn sampled with n=4) and then keeps to it.
        plan = re.search(r"plan (\d)", ctx)
        if plan is None:
            return ANSWER if k == 0 else f"<think>plan {k}</think><search>river Rome</search>"
        return ANSWER if ctx.count("<information>Doc") >= int(plan.group(1)) else SEARCH

    engine = RolloutEngine(scripted(script), lambda: CountingEnv(base()), RolloutConfig(group_size=4))
    trajectories = engine.rollout([{"options": {"index": 0}}])
    assert [t.num_turns for t in trajectories] == [1, 2, 3, 4]
    assert [t.finish_reason for t in trajectories] == ["answered"] * 4
    assert len(CountingEnv.steps) == 1 + 2 + 3 + 4
    metrics = rollout_metrics(trajectories)
    assert metrics["rollout/turns_mean"] == 2.5 and metrics["rollout/searches_mean"] == 1.5
    assert metrics["rollout/end/answered"] == 1.0 and metrics["rollout/reward_mean"] == 1.0


def test_groups_share_their_question_and_envs_are_reused(make_env, scripted):
    engine = RolloutEngine(scripted(lambda ctx, k: ANSWER), make_env(), RolloutConfig(group_size=3))
    first = engine.rollout([{"seed": 5}, {"seed": 6}, {"options": {"question_id": "q2"}}])
    assert len(first) == 9 and len(engine._envs) == 9
    for g in range(3):
        ids = {t.question_id for t in first[3 * g : 3 * g + 3]}
        assert len(ids) == 1
    assert first[6].question_id == "q2"
    again = engine.rollout(2)
    assert len(again) == 6 and len(engine._envs) == 9


def test_system_prompt_and_raw_prompts(make_env, scripted):
    engine = RolloutEngine(scripted(lambda ctx, k: ANSWER), make_env(), RolloutConfig(system_prompt="Be brief."))
    t = engine.rollout([{"options": {"index": 0}}])[0]
    assert t.segments[0].text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
    raw = RolloutEngine(scripted(lambda ctx, k: ANSWER), make_env(), RolloutConfig(use_chat_template=False))
    t = raw.rollout([{"options": {"index": 0}}])[0]
    assert t.segments[0].text.startswith("Answer the given question.")


def test_tool_call_grammar_gets_its_own_stop(make_env, scripted):
    call = '<tool_call>{"name": "search", "arguments": {"query": "Tiber"}}</tool_call>'
    engine = RolloutEngine(scripted(lambda ctx, k: call + " trailing"), make_env(action_format="tool_calls", max_turns=1), RolloutConfig())
    t = engine.rollout([{"options": {"index": 0}}])[0]
    assert t.agent_texts == [call]


def test_engine_rejects_bad_arguments(make_env, scripted, tiny):
    engine = RolloutEngine(scripted(lambda ctx, k: ANSWER), make_env(), RolloutConfig())
    with pytest.raises(ConfigError):
        engine.rollout([])
    with pytest.raises(ConfigError):
        engine.rollout([{"sead": 1}])
    for bad in ({"group_size": 0}, {"max_turn_tokens": 0}, {"max_obs_tokens": 0}, {"env_workers": 0}, {"temperature": -1.0}, {"stop": ("",)}):
        with pytest.raises(ConfigError):
            RolloutConfig(**bad)
    _, tok = tiny
    no_template = scripted(lambda ctx, k: ANSWER)
    no_template.tokenizer = tok.__class__(tokenizer_object=tok.backend_tokenizer, eos_token="<|im_end|>")
    no_template.tokenizer.chat_template = None
    with pytest.raises(ConfigError, match="chat template"):
        RolloutEngine(no_template, make_env(), RolloutConfig())


def test_env_workers_give_the_same_episodes(make_env, scripted):
    serial = RolloutEngine(scripted(search_then_answer), make_env(), RolloutConfig(group_size=2)).rollout([{"seed": 1}, {"seed": 2}])
    threaded = RolloutEngine(scripted(search_then_answer), make_env(), RolloutConfig(group_size=2, env_workers=3))
    parallel = threaded.rollout([{"seed": 1}, {"seed": 2}])
    threaded.close()
    assert [t.token_ids for t in serial] == [t.token_ids for t in parallel]


class _ReversingRanker:
    """A ranker model that shows the pool in reverse (a valid rerank of every candidate); records each call's size."""

    def __init__(self):
        self.calls: list[int] = []

    def chat(self, conversations, *, max_tokens=512, temperature=0.0):
        self.calls.append(len(conversations))
        replies = []
        for c in conversations:
            n = c[-1]["content"].count("(Title: ")
            k = int(re.search(r"exactly (\d+)", c[0]["content"]).group(1))
            replies.append("<reason>r</reason><rerank>" + " > ".join(f"[{i}]" for i in range(n, n - k, -1)) + "</rerank>")
        return replies

    def describe(self):
        return {"kind": "reversing"}


def test_gathered_env_calls_give_the_same_episodes_in_one_ranker_batch_per_turn(make_env, scripted):
    from searchgym.backends.gather import GatheringBackend
    from searchgym.rankers.llm import LLMRanker

    def search_twice(context: str, k: int) -> str:  # sample 1 of each group answers at once; the others search twice
        return ANSWER if k == 1 or context.count("<information>Doc") >= 2 else SEARCH

    runs = {}
    for gather in (False, True):
        model = _ReversingRanker()
        factory = make_env(ranker=LLMRanker(GatheringBackend(model)), candidates=5, top_k=2)
        engine = RolloutEngine(scripted(search_twice), factory, RolloutConfig(group_size=4, gather_env_calls=gather))
        runs[gather] = (engine.rollout([{"options": {"index": 0}}, {"options": {"index": 1}}]), model.calls)
        engine.close()
    (serial, serial_calls), (gathered, gathered_calls) = runs[False], runs[True]
    assert [t.token_ids for t in serial] == [t.token_ids for t in gathered]
    assert [[i.get("shown") for i in t.step_infos] for t in serial] == [[i.get("shown") for i in t.step_infos] for t in gathered]
    shown = gathered[0].step_infos[0]["shown"]
    assert [d["id"] for d in shown] == gathered[0].step_infos[0]["candidates"]["ids"][::-1][:2]  # the ranker's order
    # 8 episodes, 6 of which search on turns 1 and 2: one call per search alone, one batch per turn gathered.
    assert serial_calls == [1] * 12 and gathered_calls == [6, 6]
