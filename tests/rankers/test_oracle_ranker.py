"""The oracle ranker moves answer-bearing candidates to the top and keeps retriever order otherwise."""

import pytest

from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.envs import SearchQAEnv
from searchgym.errors import BatchError, ConfigError
from searchgym.rankers import GoldPassageRanker, OracleRanker, Ranker, answer_bearing, resolve_ranker
from searchgym.retrieval import Hit

QUESTION = "Which river flows through the capital of Italy?"
POOL = [
    Hit(Document("a", "Rome", "Rome is the capital city of Italy."), 9.0),
    Hit(Document("b", "Tiber", "The Tiber flows through Rome."), 8.0),          # the answer in the title and text
    Hit(Document("c", "Po", "The Po is the longest river of Italy."), 7.0),
    Hit(Document("d", "Rivers", "The tiber's course is long."), 6.0),         # "tiber's" normalizes to "tibers": no
    Hit(Document("e", "Bridges", "Bridges over the TIBER, in Rome."), 5.0),     # case and punctuation ignored: yes
]


def test_answer_bearing_candidates_go_first_in_retriever_order():
    ranker = OracleRanker({QUESTION: ["Tiber"]})
    assert isinstance(ranker, Ranker)
    # Answer-bearing: b (1) and e (4), in retriever order; then a, c, d (0, 2, 3).
    assert ranker.rank(QUESTION, "river", POOL, 5).order == (1, 4, 0, 2, 3)
    assert ranker.rank(QUESTION, "river", POOL, 3).order == (1, 4, 0)
    assert ranker.rank(QUESTION, "river", POOL, 1).order == (1,)


def test_no_answer_bearing_candidate_keeps_retriever_order():
    ranker = OracleRanker({QUESTION: ["Arno"]})
    assert ranker.rank(QUESTION, "river", POOL, 3).order == (0, 1, 2)


def test_answer_bearing_matches_whole_tokens_of_title_and_text():
    docs = [Document("x", "Paris", "A city."), Document("y", "A", "Parisian cafes."), Document("z", "B", "Born in Paris, France.")]
    assert answer_bearing(docs, ["Paris"]) == [0, 2]
    assert answer_bearing(docs, ["Paris, France", "nothing"]) == [2]


def test_records_sharing_a_question_pool_their_answers():
    records = [QARecord("q1", QUESTION, ("Tiber",)), QARecord("q2", QUESTION, ("Po", "Tiber"))]
    ranker = OracleRanker.from_records(records)
    assert ranker.answers == {QUESTION: ("Tiber", "Po")}
    assert ranker.rank(QUESTION, "river", POOL, 5).order == (1, 2, 4, 0, 3)


def test_unknown_question_and_missing_answers_are_config_errors():
    with pytest.raises(BatchError, match="no gold answers for question 'Who\\?'"):
        OracleRanker({QUESTION: ["Tiber"]}).rank("Who?", "q", POOL, 1)
    with pytest.raises(ConfigError, match="needs gold answers"):
        OracleRanker({QUESTION: []})
    with pytest.raises(ConfigError, match="needs the questions' records"):
        resolve_ranker("oracle")


def test_env_option_oracle_shows_the_answer_bearing_candidate(small_records, ten_doc_corpus):
    # "river rome": BM25's top document is not necessarily the Tiber's; with the oracle it must be one
    # holding "Tiber" (d7 "Tiber", the only document that names it).
    def first_shown(ranker):
        env = SearchQAEnv(small_records, ten_doc_corpus, ranker=ranker, top_k=1, candidates=10, cache_dir=False)
        env.reset(options={"question_id": "q0"})
        *_, info = env.step("<search>capital of Italy</search>")
        return info["shown"][0]["id"], info["candidates"]["ids"], env.unwrapped.ranker.describe()["kind"]

    plain_id, pool, plain_kind = first_shown(None)
    oracle_id, same_pool, oracle_kind = first_shown("oracle")
    assert (plain_kind, oracle_kind) == ("identity", "oracle")
    assert same_pool == pool and "d7" in pool
    assert oracle_id == "d7"
    assert plain_id == pool[0] != "d7"  # the retriever alone would show another document


def test_gold_passages_go_first_in_retriever_order():
    ranker = GoldPassageRanker({QUESTION: ["e", "c", "zz"]})  # "zz" is not in the pool: nothing to move
    assert isinstance(ranker, Ranker)
    assert ranker.rank(QUESTION, "river", POOL, 5).order == (2, 4, 0, 1, 3)
    assert ranker.rank(QUESTION, "river", POOL, 1).order == (2,)
    assert GoldPassageRanker({QUESTION: ["zz"]}).rank(QUESTION, "river", POOL, 2).order == (0, 1)


def test_gold_passage_ranker_from_records_and_by_name():
    records = [QARecord("q1", QUESTION, ("Tiber",), gold_docs=("b",)), QARecord("q2", QUESTION, ("Tiber",), gold_docs=("d",))]
    ranker = resolve_ranker("gold", records)
    assert isinstance(ranker, GoldPassageRanker) and ranker.describe()["kind"] == "gold"
    assert ranker.rank(QUESTION, "river", POOL, 3).order == (1, 3, 0)
    with pytest.raises(BatchError, match="no gold passages for question 'Who\\?'"):
        ranker.rank("Who?", "q", POOL, 1)
    with pytest.raises(ConfigError, match="gold passages"):
        GoldPassageRanker.from_records([QARecord("q3", "Other?", ("x",))])
    with pytest.raises(ConfigError, match="needs the questions' records"):
        resolve_ranker("gold")

