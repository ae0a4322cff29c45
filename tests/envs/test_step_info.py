"""The step-info contract: per-turn judge labels and gold-entity matches, on hand-written trajectories.

A scripted retriever returns fixed documents per query, so every expected label and match below is
worked out from the ten-document corpus by hand.
"""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import searchgym  # noqa: F401 - registers the ids
from searchgym.corpus import Corpus, Document
from searchgym.data.records import QARecord
from searchgym.data.synthetic import oracle_trajectory
from searchgym.envs import SearchQAEnv
from searchgym.errors import ConfigError
from searchgym.judges import GoldJudge, Verdict
from searchgym.retrieval import Hit
from tests.conftest import TEN_DOCS

DOCS = {d.id: d for d in TEN_DOCS}
SCRIPT = {
    "capital of Italy": ["d1", "d0"],
    "Rome river": ["d7", "d1"],
    "river in Rome": ["d1", "d0"],
    "Berlin": ["d2", "d8"],
    "Spree": ["d8", "d2"],
}
BRIDGE = QARecord("bridge", "Which river flows through the capital of Italy?", ("Tiber",), gold_entities=("Rome", "Tiber"),
                  gold_docs=("d1", "d7"), gold_titles=("Rome", "Tiber"), hops=2, source="test")
NO_ENTITIES = QARecord("plain", "Who discovered radioactivity?", ("Henri Becquerel",), source="test")


class Scripted:
    def search(self, queries, k):
        return [[Hit(DOCS[i], 1.0 / (r + 1)) for r, i in enumerate(SCRIPT.get(q, []))][:k] for q in queries]

    def describe(self):
        return {"kind": "scripted"}


def make_env(records=(BRIDGE,), **kwargs):
    return SearchQAEnv(list(records), retriever=Scripted(), top_k=2, candidates=2, cache_dir=False, **kwargs)


def play(env, turns, question_id="bridge"):
    env.reset(options={"question_id": question_id})
    return [env.step(t)[4] for t in turns]


def values(labels):
    return (labels["retrieval_utility"], labels["reasoning_correctness"], labels["contribution"])


GOOD = [
    "<think>I need the capital of Italy first.</think><search>capital of Italy</search>",
    "<think>Doc 1 says Rome. Which river flows through Rome?</think><search>Rome river</search>",
    "<think>The Tiber flows through Rome.</think><answer>Tiber</answer>",
]


def test_good_trajectory_labels_and_entities():
    infos = play(make_env(judge="gold"), GOOD)
    # Turn 0: d1 (gold, new) shown: u = 1; the query rephrases the question: v = 1.
    assert values(infos[0]["labels"]) == (1, 1, 1)
    assert infos[0]["labels"]["judge"] == "gold" and not infos[0]["labels"]["deferred"] and not infos[0]["labels"]["pending"]
    # Rome is only in the shown documents (d1's title and text), not in the thinking: not matched yet.
    assert infos[0]["entities"] == {"gold": ["Rome", "Tiber"], "matched_thinking": [], "new_in_thinking": [], "in_query": [],
                                    "in_docs": ["Rome"], "rate": 0.0}
    # Turn 1: d7 is new gold; the query follows Rome, which d1 revealed.
    assert values(infos[1]["labels"]) == (1, 1, 1)
    assert infos[1]["entities"]["new_in_thinking"] == ["Rome"] and infos[1]["entities"]["in_query"] == ["Rome"]
    assert infos[1]["entities"]["in_docs"] == ["Rome", "Tiber"] and infos[1]["entities"]["rate"] == 0.5
    # Turn 2 answers: no labels for a non-search turn; the thinking names the Tiber, so gamma = 2/2.
    assert values(infos[2]["labels"]) == (None, None, None)
    assert infos[2]["entities"]["new_in_thinking"] == ["Tiber"] and infos[2]["entities"]["rate"] == 1.0
    ep = infos[2]["episode"]
    assert [values(t) for t in ep["turn_labels"]] == [(1, 1, 1), (1, 1, 1), (None, None, None)]
    assert ep["entity_rate"] == 1.0 and ep["judge_failures"] == 0 and ep["em"] == 1.0


def test_gold_document_seen_again_is_not_novel():
    infos = play(make_env(judge="gold"), [GOOD[0], "<think>Rome is the capital. What river is in Rome?</think><search>river in Rome</search>"])
    # Turn 1 shows d1 (seen at turn 0) and d0: u = 0. The query follows Rome: v = 1.
    assert values(infos[1]["labels"]) == (0, 1, 0)


def test_correct_answer_with_no_contributing_round():
    turns = [
        "<think>Let me look at Berlin.</think><search>Berlin</search>",  # off the question: u = 0, v = 0
        "<think>I know it: the Tiber.</think><answer>Tiber</answer>",  # right answer from memory
    ]
    infos = play(make_env(judge="gold"), turns)
    ep = infos[-1]["episode"]
    assert ep["em"] == 1.0 and infos[-1]["reward"]["total"] == 1.0
    assert [t["contribution"] for t in ep["turn_labels"]] == [0, None]
    # The thinking of the answer turn names the Tiber: gamma = 1/2 although no round found it.
    assert ep["entity_rate"] == 0.5


def test_deferred_judge_fills_labels_at_episode_end():
    sync = play(make_env(judge="gold"), GOOD)[-1]["episode"]["turn_labels"]
    infos = play(make_env(judge="gold", judge_mode="deferred"), GOOD)
    pending = infos[0]["labels"]
    assert pending["pending"] and pending["deferred"] and values(pending) == (None, None, None)
    final = infos[-1]["episode"]["turn_labels"]
    assert [values(t) for t in final] == [values(t) for t in sync]
    assert all(t["deferred"] and not t["pending"] for t in final)


class CountingJudge(GoldJudge):
    deferred = True

    def __init__(self):
        super().__init__()
        self.batches = []

    def label(self, requests):
        self.batches.append([r.turn for r in requests])
        return super().label(requests)


def test_deferred_judge_gets_the_episode_in_one_batch_even_when_truncated():
    judge = CountingJudge()
    env = make_env(judge=judge, max_turns=2)
    infos = play(env, [GOOD[0], GOOD[1]])  # out of turns: truncated
    assert judge.batches == [[0, 1]]
    assert infos[-1]["episode"]["outcome"] == "out_of_turns"
    assert [values(t) for t in infos[-1]["episode"]["turn_labels"]] == [(1, 1, 1), (1, 1, 1)]


class BrokenJudge:
    name, deferred = "broken", False

    def __init__(self, behaviour):
        self.behaviour = behaviour

    def label(self, requests):
        if self.behaviour == "raise":
            raise RuntimeError("judge crashed")
        if self.behaviour == "short":
            return []
        return ["not a verdict"] * len(requests)

    def describe(self):
        return {}


@pytest.mark.parametrize("behaviour, error", [("raise", "exception"), ("short", "count_mismatch"), ("junk", "exception")])
@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_judge_failures_never_raise_and_are_counted(behaviour, error, mode):
    infos = play(make_env(judge=BrokenJudge(behaviour), judge_mode=mode), GOOD)
    labels = infos[-1]["episode"]["turn_labels"]
    for t in labels[:2]:
        assert t["failed"] and t["error"] == error and values(t) == (0, 0, 0)
    assert infos[-1]["episode"]["judge_failures"] == 2
    assert infos[-1]["reward"]["total"] == 1.0  # the episode itself is unaffected


class BrokenEpisodes(GoldJudge):
    """A GoldJudge whose per-episode labelling (`start`) goes wrong in one of several ways."""

    def __init__(self, behaviour):
        super().__init__()
        self.behaviour = behaviour

    def start(self, record, gold_docs_searchable=None):
        if self.behaviour == "start_raises":
            raise RuntimeError("cannot start")
        behaviour = self.behaviour

        class Episode:
            def label(self, rnd):
                return 1 / 0 if behaviour == "label_raises" else "not a verdict"

        return Episode()


def test_a_judge_that_cannot_start_an_episode_labels_round_by_round():
    infos = play(make_env(judge=BrokenEpisodes("start_raises"), judge_mode="sync"), GOOD)
    assert [values(t) for t in infos[-1]["episode"]["turn_labels"]] == [(1, 1, 1), (1, 1, 1), (None, None, None)]
    assert infos[-1]["episode"]["judge_failures"] == 0


@pytest.mark.parametrize("behaviour", ["label_raises", "label_junk"])
def test_episode_labelling_failures_never_raise_and_are_counted(behaviour):
    infos = play(make_env(judge=BrokenEpisodes(behaviour), judge_mode="sync"), GOOD)
    for t in infos[-1]["episode"]["turn_labels"][:2]:
        assert t["failed"] and t["error"] == "exception" and values(t) == (0, 0, 0)
    assert infos[-1]["episode"]["judge_failures"] == 2 and infos[-1]["reward"]["total"] == 1.0


def test_invalid_turn_thinking_counts_for_entities():
    infos = play(make_env(judge="gold"), ["<think>Maybe Rome?</think> no action here", GOOD[0]])
    assert infos[0]["invalid_action"] and values(infos[0]["labels"]) == (None, None, None)
    assert infos[0]["entities"]["new_in_thinking"] == ["Rome"]


def test_without_judge_or_entities():
    infos = play(make_env(judge=None), GOOD)
    assert all(i["labels"] is None and "judge=None" in i["labels_reason"] for i in infos)
    assert infos[-1]["episode"]["turn_labels"] == [None, None, None] and infos[-1]["episode"]["judge_failures"] == 0
    infos = play(make_env(judge=None, match_entities=False), GOOD)
    assert all(i["entities"] is None for i in infos) and infos[-1]["episode"]["entity_rate"] is None
    infos = play(make_env(records=(NO_ENTITIES,), judge="gold"), ["<search>Spree</search>", "<answer>x</answer>"], "plain")
    assert infos[0]["entities"] is None and infos[-1]["episode"]["entity_rate"] is None
    assert infos[0]["labels"]["judge"] == "gold"  # answers basis: still labelled


def test_default_judge_labels_questions_with_gold_evidence_and_says_why_not_elsewhere():
    env = make_env(records=(BRIDGE, NO_ENTITIES))
    labelled = play(env, GOOD)
    assert [i["labels"] for i in labelled] == [i["labels"] for i in play(make_env(judge="gold"), GOOD)]
    assert labelled[0]["labels"]["judge"] == "gold" and all(i["labels_reason"] is None for i in labelled)
    _, reset_info = env.reset(options={"question_id": "plain"})
    assert "'plain'" in reset_info["labels_reason"] and "LLMJudge" in reset_info["labels_reason"]
    unlabelled = [env.step(t)[4] for t in ["<search>Spree</search>", "<answer>x</answer>"]]
    assert all(i["labels"] is None and i["labels_reason"] == reset_info["labels_reason"] for i in unlabelled)
    assert unlabelled[-1]["episode"]["turn_labels"] == [None, None]
    # The next episode on an annotated question is labelled again.
    assert play(env, GOOD)[0]["labels"]["judge"] == "gold"
    assert make_env(records=(NO_ENTITIES,)).judge is None and isinstance(env.judge, GoldJudge)


def test_registered_envs_label_by_default():
    env = gym.make("SearchQA-Synthetic-v0", num_entities=300, num_questions=20, cache_dir=False)
    _, info = env.reset(seed=0)
    assert info["labels_reason"] is None
    world, record = env.unwrapped.world, env.unwrapped.record
    infos = [env.step(turn)[4] for turn in world.oracle_trajectory(record)]
    assert [i["labels"]["contribution"] for i in infos if i["action"] == "search"] == [1] * record.hops
    assert infos[-1]["entities"]["rate"] == 1.0


def test_search_that_matches_nothing_shows_a_hint():
    env = make_env()
    env.reset(options={"question_id": "bridge"})
    obs, *_, info = env.step("<search>nothing like this</search>")
    assert info["shown"] == [] and "<information></information>" not in obs
    assert "No document matches this query" in obs and obs.strip().startswith("<information>")


def test_gold_docs_searchable_follows_the_corpus(ten_doc_corpus):
    foreign = QARecord("f", BRIDGE.question, ("Tiber",), gold_entities=("Rome", "Tiber"), gold_docs=("wiki-1", "wiki-2"),
                       gold_titles=("Rome", "Tiber"))
    judge = CountingJudge()
    env = SearchQAEnv([foreign], ten_doc_corpus, retriever=Scripted(), top_k=2, candidates=2, judge=judge, judge_mode="sync")
    env.reset()
    _, _, _, _, info = env.step("<search>capital of Italy</search>")
    # Gold ids are not in this corpus, so the judge matched by title: Rome's document is relevant.
    assert info["labels"]["retrieval_utility"] == 1


class SeeingJudge(GoldJudge):
    """GoldJudge that notes what each request said about the gold documents' presence."""

    def __init__(self):
        super().__init__()
        self.searchable = []

    def label(self, requests):
        self.searchable += [r.gold_docs_searchable for r in requests]
        return super().label(requests)


def test_gold_docs_searchable_is_worked_out_again_for_a_new_corpus(ten_doc_corpus):
    # Worked out once per question, but for the corpus the env searches now: a corpus swapped in between
    # episodes holds the gold ids (the first does not).
    foreign = QARecord("f", BRIDGE.question, ("Tiber",), gold_entities=("Rome", "Tiber"), gold_docs=("wiki-1",), gold_titles=("Rome",))
    judge = SeeingJudge()
    env = SearchQAEnv([foreign], ten_doc_corpus, retriever=Scripted(), top_k=2, candidates=2, judge=judge, judge_mode="sync")
    for corpus in (ten_doc_corpus, ten_doc_corpus, Corpus([*ten_doc_corpus, Document("wiki-1", "Rome", "Rome, again.")]), ten_doc_corpus):
        env.corpus = corpus
        env.reset()
        env.step("<search>capital of Italy</search>")
    assert judge.searchable == [False, False, True, False]


@pytest.mark.parametrize(
    "kwargs, msg",
    [({"judge": "llm"}, "LLMJudge"), ({"judge": "oracle"}, "unknown judge"), ({"judge": object()}, "judge must"),
     ({"judge": "gold", "judge_mode": "later"}, "judge_mode")],
)
def test_bad_judge_arguments(kwargs, msg):
    with pytest.raises(ConfigError, match=msg):
        make_env(**kwargs)


def test_synthetic_oracle_gets_full_credit():
    env = gym.make("SearchQA-Synthetic-v0", num_entities=300, num_questions=12, hops=(1, 2, 3), cache_dir=False,
                   judge="gold", max_turns=5, retriever="rank_bm25")
    for index in range(6):
        _, info = env.reset(options={"index": index})
        record = env.unwrapped.records[index]
        for turn in oracle_trajectory(record):
            *_, info = env.step(turn)
        ep = info["episode"]
        assert ep["em"] == 1.0 and ep["entity_rate"] == 1.0, record.id
        assert [t["contribution"] for t in ep["turn_labels"]] == [1] * record.hops + [None], record.id


def test_check_env_with_judge_and_entities():
    check_env(make_env(judge="gold"), skip_render_check=True)


def test_step_info_verdict_types_are_plain_data():
    infos = play(make_env(judge="gold"), GOOD)
    import json

    json.dumps(infos[-1])  # every value is JSON-serializable (learners log and ship infos)
    assert isinstance(GoldJudge().label([])[:0], list) and Verdict.failure("timeout").failed


def test_judge_and_entity_matcher_share_scans_without_changing_results():
    # With GoldJudge and entity matching both on, the two share one phrase set per question (each text
    # and document is scanned once). Labels must equal those of the judge alone, and matches those of the
    # matcher alone, on every step; the trajectories mix oracle turns with an off-track and a guessing turn.
    from searchgym.entities import clear_caches

    common = {"num_entities": 300, "num_questions": 12, "hops": (1, 2, 3), "cache_dir": False, "max_turns": 5,
              "retriever": "rank_bm25"}
    both = gym.make("SearchQA-Synthetic-v0", judge="gold", **common).unwrapped
    judge_only = gym.make("SearchQA-Synthetic-v0", judge="gold", match_entities=False, **common).unwrapped
    entities_only = gym.make("SearchQA-Synthetic-v0", **common).unwrapped
    checked = 0
    for index in range(12):
        record = both.records[index]
        answer = f"<think>It is {record.gold_entities[-1]}.</think><search>{record.gold_entities[-1]}</search>"
        turns = ["<think>Let me look around.</think><search>history of the region</search>", answer,
                 *oracle_trajectory(record)][: both.max_turns]
        if index == 6:
            clear_caches()  # a cleared cache mid-run: the judge must pick up the matcher's new phrase set
        for env in (both, judge_only, entities_only):
            env.reset(options={"index": index})
        for turn in turns:
            *_, done_b, trunc_b, info_b = both.step(turn)
            *_, _, _, info_j = judge_only.step(turn)
            *_, _, _, info_e = entities_only.step(turn)
            assert info_b["labels"] == info_j["labels"], (record.id, turn)
            assert info_b["entities"] == info_e["entities"], (record.id, turn)
            checked += info_b["labels"] is not None and info_b["labels"]["retrieval_utility"] is not None
            if done_b or trunc_b:
                break
        assert info_b["episode"]["turn_labels"] == info_j["episode"]["turn_labels"]
        assert both._credit.matcher._phrases is both.judge._gold(record).name_set
    assert checked >= 24


def test_final_labels_and_entity_rate_read_the_summary_or_the_steps():
    from searchgym.info import final_entity_rate, final_labels

    infos = play(make_env(judge="gold"), GOOD)
    # Ended: the summary's two search rounds (1, 1, 1); the answer turn is no round. gamma = 2/2.
    assert [values(lab) for lab in final_labels(infos)] == [(1, 1, 1), (1, 1, 1)] and final_entity_rate(infos) == 1.0
    # Not ended yet (no summary): the steps' labels, and the last step's gamma (Rome matched: 1/2).
    assert [values(lab) for lab in final_labels(infos[:2])] == [(1, 1, 1), (1, 1, 1)] and final_entity_rate(infos[:2]) == 0.5
    # A deferred judge's steps are pending until the end: no final labels before it.
    deferred = play(make_env(judge="gold", judge_mode="deferred"), GOOD)
    assert final_labels(deferred[:2]) == [] and [values(lab) for lab in final_labels(deferred)] == [(1, 1, 1), (1, 1, 1)]
    # No gold entities: no rate; no steps: nothing.
    plain = play(make_env(records=(NO_ENTITIES,), judge="gold"), ["<answer>Henri Becquerel</answer>"], "plain")
    assert final_entity_rate(plain) is None and final_labels([]) == [] and final_entity_rate([]) is None
