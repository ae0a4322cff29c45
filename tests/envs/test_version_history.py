"""Earlier behaviours of the `-v0` envs that an argument brings back (the env docstring's Version History):
the observation text (`doc_format="plain"`, `no_match_hint=False`) and the step-info schema (`info_schema`).
Each expected value is written out here as the earlier version produced it."""

from __future__ import annotations

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.envs import SearchQAEnv
from searchgym.errors import ConfigError
from searchgym.retrieval import Hit

ROME = Document("d1", "Rome", "Rome is the capital city of Italy.")
TIBER = Document("d7", "Tiber", "The Tiber flows through Rome.")
RECORD = QARecord("q0", "Which river flows through the capital of Italy?", ("Tiber",), gold_entities=("Rome", "Tiber"),
                  gold_docs=("d1", "d7"), hops=2, source="test")


class FixedRetriever:
    """Answers every query with Rome then Tiber, and a query holding `nothing` with no document."""

    def search(self, queries, k):
        return [[] if "nothing" in q else [Hit(ROME, 2.5), Hit(TIBER, 1.5)][:k] for q in queries]

    def describe(self):
        return {"kind": "fixed"}


def make(**kwargs) -> SearchQAEnv:
    return SearchQAEnv([RECORD], None, retriever=FixedRetriever(), top_k=2, candidates=2, judge="gold", **kwargs)


def search(env: SearchQAEnv, query: str) -> str:
    env.reset(options={"index": 0})
    return env.step(f"<think>Look it up.</think><search>{query}</search>")[0]


def test_doc_format_plain_writes_the_titles_as_before_the_search_r1_text():
    assert search(make(), "capital of Italy") == (
        '\n\n<information>Doc 1(Title: "Rome") Rome is the capital city of Italy.\n'
        'Doc 2(Title: "Tiber") The Tiber flows through Rome.</information>\n\n'
    )
    assert search(make(doc_format="plain"), "capital of Italy") == (
        "\n\n<information>Doc 1(Title: Rome) Rome is the capital city of Italy.\n"
        "Doc 2(Title: Tiber) The Tiber flows through Rome.</information>\n\n"
    )


@pytest.mark.parametrize("doc_format", [None, "plain"])
def test_no_match_hint_false_answers_an_empty_search_as_before_the_hint(doc_format):
    hint = ("\n\n<information>No document matches this query. Search again with other words, e.g. names or phrases "
            "from the question.</information>\n\n")
    assert search(make(doc_format=doc_format), "nothing at all") == hint
    assert search(make(doc_format=doc_format, no_match_hint=False), "nothing at all") == "\n\n<information></information>\n\n"
    # Only the empty case differs.
    assert search(make(doc_format=doc_format, no_match_hint=False), "Rome") == search(make(doc_format=doc_format), "Rome")


def test_no_match_hint_false_is_for_the_tag_grammar_only():
    with pytest.raises(ConfigError, match="no_match_hint=False applies to action_format='tags' only"):
        make(action_format="tool_calls", no_match_hint=False)


RESET_V2 = ["schema_version", "question_id", "source", "hops", "num_gold_entities", "max_turns"]
STEP_V2 = ["schema_version", "question_id", "turn", "action", "invalid_action", "invalid_reason", "thinking", "query", "answer",
           "shown", "candidates", "ranker", "labels", "entities", "reward"]
ANSWER_REWARD_V2 = ["answer", "em", "f1", "cover_em", "total", "format"]
EPISODE_V2 = ["outcome", "turns", "searches", "invalid_actions", "em", "f1", "cover_em", "format_valid", "turn_labels",
              "judge_failures", "entity_rate"]


def episode(env: SearchQAEnv) -> tuple[dict, dict, dict]:
    """The reset info, the search step's info and the answer step's info of one two-turn episode."""
    _, reset = env.reset(options={"index": 0})
    _, _, _, _, searched = env.step("<think>The capital of Italy is Rome.</think><search>river Rome</search>")
    _, reward, terminated, _, answered = env.step("<think>The Tiber flows through Rome.</think><answer>Tiber</answer>")
    assert reward == 1.0 and terminated
    return reset, searched, answered


def test_info_schema_2_emits_schema_2s_keys_exactly():
    reset, searched, answered = episode(make(info_schema=2))
    assert list(reset) == RESET_V2 and reset["schema_version"] == 2
    assert list(searched) == STEP_V2 and searched["schema_version"] == 2
    assert list(searched["candidates"]) == ["ids", "scores"] and list(searched["reward"]) == ["total"]
    assert list(answered) == [*STEP_V2, "episode"]
    assert list(answered["reward"]) == ANSWER_REWARD_V2
    assert list(answered["episode"]) == EPISODE_V2
    # The values are today's: the judge still labels, the reward is still EM.
    assert searched["labels"]["judge"] == "gold" and answered["reward"]["em"] == 1.0


def test_info_schema_1_also_has_candidate_titles():
    reset, searched, answered = episode(make(info_schema=1))
    assert list(reset) == RESET_V2 and reset["schema_version"] == 1
    assert list(searched) == STEP_V2 and searched["schema_version"] == 1
    assert searched["candidates"] == {"ids": ["d1", "d7"], "titles": ["Rome", "Tiber"], "scores": [2.5, 1.5]}
    assert list(answered["reward"]) == ANSWER_REWARD_V2 and list(answered["episode"]) == EPISODE_V2


def test_the_current_schema_has_what_schema_3_added():
    reset, searched, answered = episode(make())
    assert list(reset) == [*RESET_V2, "labels_reason"] and reset["schema_version"] == 3
    assert list(searched) == [*STEP_V2[:13], "labels_reason", *STEP_V2[13:]]
    assert searched["candidates"] == {"ids": ["d1", "d7"], "scores": [2.5, 1.5]}
    assert list(answered["reward"]) == ["answer", "em", "f1", "cover_em", "subem", "total", "format"]
    assert list(answered["episode"]) == [*EPISODE_V2[:7], "subem", *EPISODE_V2[7:]]


def test_an_unknown_schema_is_refused():
    with pytest.raises(ConfigError, match=r"info_schema must be one of \(1, 2, 3\)"):
        make(info_schema=4)


def test_the_restoring_arguments_go_through_gym_make():
    env = gym.make("SearchQA-Synthetic-v0", num_entities=300, num_questions=5, cache_dir=False, info_schema=2, doc_format="plain",
                   no_match_hint=False)
    _, reset = env.reset(seed=0)
    obs, _, _, _, info = env.step("<search>qqqqzzzz</search>")
    assert list(reset) == RESET_V2 and list(info) == STEP_V2
    assert obs == "\n\n<information></information>\n\n"
