import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searchgym.envs import SearchQAEnv
from searchgym.errors import ConfigError, EpisodeStateError
from searchgym.info import SCHEMA_VERSION, StepInfo


@pytest.fixture
def env(small_records, ten_doc_corpus):
    return SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, render_mode="ansi")


def test_reset_prompt_hides_answer_and_reports_question(env):
    obs, info = env.reset(seed=0, options={"question_id": "q1"})
    assert "Who discovered radioactivity?" in obs and "Becquerel" not in obs
    assert info == {"schema_version": SCHEMA_VERSION, "question_id": "q1", "source": "test", "hops": 1, "num_gold_entities": 1, "max_turns": 4,
                    "labels_reason": None}


def test_search_then_answer(env):
    env.reset(options={"question_id": "q1"})
    obs, r, term, trunc, info = env.step("<think>Need the discoverer.</think><search>who discovered radioactivity Becquerel</search>")
    assert (r, term, trunc) == (0.0, False, False)
    assert obs.startswith('\n\n<information>Doc 1(Title: "Radioactivity") Radioactivity was discovered by Henri Becquerel')
    assert obs.count("Doc ") == 3
    assert info["action"] == "search" and info["query"] == "who discovered radioactivity Becquerel" and info["thinking"] == "Need the discoverer."
    assert [d["id"] for d in info["shown"]] == info["candidates"]["ids"][:3] and set(info["candidates"]) == {"ids", "scores"}
    assert info["shown"][0] == {"id": "d5", "title": "Radioactivity", "score": info["candidates"]["scores"][0], "candidate_rank": 0}
    assert "episode" not in info
    obs, r, term, trunc, info = env.step("<think>Doc 1 says Becquerel.</think><answer>becquerel</answer>")
    assert (obs, r, term, trunc) == ("", 1.0, True, False)
    assert info["reward"] == {"answer": 1.0, "em": 1.0, "f1": 1.0, "cover_em": 1.0, "subem": 1.0, "total": 1.0, "format": 1.0}
    ep = info["episode"]
    assert (ep["outcome"], ep["turns"], ep["searches"], ep["invalid_actions"], ep["format_valid"]) == ("answered", 2, 1, 0, True)
    assert "[agent]" in env.render()


def test_doc_format_plain_and_custom_template_keep_titles_unquoted(small_records, ten_doc_corpus):
    plain = SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, doc_format="plain")
    own = SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, template="Q: {question}\n")
    quoted = SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, template="Q: {question}\n", doc_format="search-r1")
    observations = []
    for env in (plain, own, quoted):
        env.reset(options={"question_id": "q1"})
        observations.append(env.step("<search>who discovered radioactivity</search>")[0])
    assert observations[0] == observations[1]
    assert observations[0].startswith("\n\n<information>Doc 1(Title: Radioactivity) Radioactivity was discovered")
    assert observations[2] == observations[0].replace("(Title: Radioactivity)", '(Title: "Radioactivity")').replace(
        "(Title: Henri Becquerel)", '(Title: "Henri Becquerel")'
    ).replace("(Title: Marie Curie)", '(Title: "Marie Curie")').replace("(Title: Nobel Prize in Physics)", '(Title: "Nobel Prize in Physics")')
    with pytest.raises(ConfigError, match="doc_format"):
        SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, doc_format="json")
    with pytest.raises(ConfigError, match="doc_format applies"):
        SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, action_format="tool_calls", doc_format="plain")


def test_wrong_answer_scores_partial_f1(env):
    env.reset(options={"question_id": "q1"})
    _, r, term, _, info = env.step("<answer>Pierre Becquerel</answer>")
    assert r == 0.0 and term
    assert info["reward"]["f1"] == pytest.approx(2 / 3)


def test_subem_is_reported_and_can_be_the_reward(small_records, ten_doc_corpus):
    # "Becquerels" holds the gold "Becquerel" as a substring but not as a whole token.
    for reward, expected in (("em", 0.0), ("cover_em", 0.0), ("subem", 1.0)):
        env = SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, answer_reward=reward)
        env.reset(options={"question_id": "q1"})
        _, r, term, _, info = env.step("<answer>the Becquerels</answer>")
        assert term and r == expected and info["reward"]["answer"] == expected
        assert (info["reward"]["cover_em"], info["reward"]["subem"]) == (0.0, 1.0)
        assert info["episode"]["subem"] == 1.0


def test_invalid_action_is_a_normal_step(env):
    env.reset(options={"index": 0})
    obs, r, term, trunc, info = env.step("I think the answer is Tiber")
    assert (r, term, trunc) == (0.0, False, False)
    assert info["invalid_action"] and info["invalid_reason"] == "no_action"
    assert "invalid" in obs and "<answer>" in obs
    obs, r, term, trunc, info = env.step(None)  # type: ignore[arg-type]
    assert info["invalid_reason"] == "not_text"
    # The episode goes on after invalid actions.
    _, r, term, _, _ = env.step("<answer>Tiber</answer>")
    assert (r, term) == (1.0, True)


def test_out_of_turns_truncates_never_both(small_records, ten_doc_corpus):
    env = SearchQAEnv(small_records, ten_doc_corpus, max_turns=2, cache_dir=False)
    env.reset(seed=3)
    _, _, term, trunc, _ = env.step("<search>Paris</search>")
    assert not term and not trunc
    _, r, term, trunc, info = env.step("<search>Rome</search>")
    assert (r, term, trunc) == (0.0, False, True)
    assert info["episode"]["outcome"] == "out_of_turns" and info["reward"]["format"] == 0.0
    with pytest.raises(EpisodeStateError):
        env.step("<answer>x</answer>")


def test_answer_on_last_turn_terminates_not_truncates(small_records, ten_doc_corpus):
    env = SearchQAEnv(small_records, ten_doc_corpus, max_turns=1, cache_dir=False)
    env.reset(options={"index": 0})
    _, r, term, trunc, _ = env.step("<answer>Tiber</answer>")
    assert (r, term, trunc) == (1.0, True, False)


def test_same_seed_same_episodes(small_records, ten_doc_corpus):
    def questions(seed):
        env = SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False)
        out = [env.reset(seed=seed)[1]["question_id"]]
        out += [env.reset()[1]["question_id"] for _ in range(9)]
        return out

    assert questions(7) == questions(7)
    assert len({tuple(questions(s)) for s in range(5)}) > 1


def test_pluggable_reward_template_and_ranker(small_records, ten_doc_corpus):
    from searchgym.rankers import RankResult

    class Reverse:
        def rank(self, question, query, candidates, k):
            return RankResult(order=tuple(reversed(range(len(candidates))))[:k], call={"kind": "reverse"})

        def describe(self):
            return {"kind": "reverse"}

    env = SearchQAEnv(small_records, ten_doc_corpus, answer_reward="f1", template="Q: {question}\nA:", ranker=Reverse(), candidates=5, cache_dir=False)
    obs, _ = env.reset(options={"index": 1})
    assert obs == "Q: Who discovered radioactivity?\nA:"
    _, _, _, _, info = env.step("<search>radioactivity discovered</search>")
    assert info["ranker"] == {"kind": "reverse"}
    assert [d["candidate_rank"] for d in info["shown"]] == [len(info["candidates"]["ids"]) - 1 - i for i in range(len(info["shown"]))]
    _, r, _, _, _ = env.step("<answer>Henri Becquerel, Paris</answer>")
    # 2 of 3 predicted tokens match a 2-token gold: P = 2/3, R = 1, F1 = 0.8
    assert r == pytest.approx(0.8)


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": 5, "candidates": 3}, "candidates"),
        ({"max_turns": 0}, "max_turns"),
        # Counts that are not integers: 2.5 was taken as is, "3" failed deep inside with a TypeError.
        ({"top_k": 2.5}, r"top_k must be an integer >= 1, got '2.5' \(float\)"),
        ({"top_k": "3"}, r"top_k must be an integer >= 1, got '3' \(str\)"),
        ({"top_k": True}, "top_k must be an integer"),
        ({"candidates": 10.5}, "candidates must be an integer"),
        ({"max_turns": 2.5}, "max_turns must be an integer"),
        ({"max_query_chars": None}, "max_query_chars must be an integer"),
        ({"match_entities": "no"}, "match_entities must be True or False"),
        ({"template": "no field"}, "question"),
        ({"render_mode": "human"}, "render_mode"),
        ({"retriever": "nope"}, "unknown retriever"),
        ({"action_format": "xml"}, "action_format"),
    ],
)
def test_bad_config_is_a_clear_error(small_records, ten_doc_corpus, kwargs, msg):
    with pytest.raises(ConfigError, match=msg):
        SearchQAEnv(small_records, ten_doc_corpus, cache_dir=False, **kwargs)


@pytest.mark.parametrize("options, msg", [
    ({"question_id": "nope"}, "question_id: no question with id 'nope'"),
    ({"index": 99}, r"index 99 out of range: 3 questions \(0 to 2\)"),
    ({"idx": 0}, "unknown reset options"),
    # Values that were coerced (1.7 -> 1, "1" -> 1, True -> 1) or failed inside int() ("abc").
    ({"index": 1.7}, r"index must be an integer, got '1.7' \(float\)"),
    ({"index": "abc"}, r"index must be an integer, got 'abc' \(str\)"),
    ({"index": "1"}, "index must be an integer"),
    ({"index": True}, "index must be an integer"),
    ({"question_id": None}, "question_id must be a question id"),
    ({"question_id": ["q1"]}, "question_id must be a question id"),
    ({"index": 0, "question_id": "q1"}, "both given"),
    ("q1", "reset options must be a dict"),
])
def test_bad_reset_options_are_config_errors_naming_the_option(env, options, msg):
    with pytest.raises(ConfigError, match=msg):
        env.reset(options=options)


def test_reset_options_take_numpy_integers(env):
    import numpy as np

    assert env.reset(options={"index": np.int64(1)})[1]["question_id"] == env.unwrapped.records[1].id


def test_check_env(env):
    check_env(env, skip_render_check=True)


# Fragments that stress the parser: tags in every state, unicode, control characters.
_fragments = st.sampled_from(["<search>", "</search>", "<answer>", "</answer>", "<think>", "</think>", "<information>", "<tool_call>", "{", "}", "\x00", "\ud800", "🔍", " ", "Paris", "\n"])
_actions = st.one_of(st.text(max_size=200), st.lists(st.one_of(_fragments, st.text(max_size=20)), max_size=40).map("".join))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(actions=st.lists(_actions, min_size=1, max_size=6))
def test_fuzz_actions_never_raise_or_lose_state(env, actions):
    env.reset(seed=0)
    turn = 0
    for text in actions:
        obs, r, term, trunc, info = env.step(text)
        assert isinstance(obs, str) and not (term and trunc)
        assert info["turn"] == turn and info["action"] in ("search", "answer", "invalid")
        assert StepInfo.__required_keys__ <= set(info) <= set(StepInfo.__annotations__)
        assert ("episode" in info) == (term or trunc)  # the one optional key: only when the episode ends
        turn += 1
        assert len(env.turn_infos) == turn
        if term or trunc:
            assert info["episode"]["turns"] == turn
            env.reset(seed=0)
            turn = 0


def test_huge_action_is_bounded(env):
    env.reset(seed=0)
    _, _, _, _, info = env.step("<search>" + "x " * 500_000)
    assert info["invalid_reason"] == "no_action"
    _, _, _, _, info = env.step("<search>" + "paris " * 100_000 + "</search>")
    assert info["invalid_reason"] == "query_too_long"
