"""Oracle trajectories from gold annotations (`searchgym.data.oracle`): the synthetic world's own, and one
search per gold title for questions with gold titles (HotpotQA and the other files with paragraphs)."""

import re

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.data.oracle import has_oracle, oracle_turns, title_trajectory
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError
from tests.helpers import shared_file

TURN = re.compile(r"\A<think>[^<>]+</think>\n<(search|answer)>([^<>]+)</\1>\Z")


def test_titles_the_question_names_are_searched_first_then_the_answer():
    record = QARecord("b", "When was the director of Tide of Ash born?", ("1901",), gold_titles=("Mara Vell", "Tide of Ash"))
    turns = title_trajectory(record)
    assert [TURN.match(t).groups() for t in turns] == [("search", "Tide of Ash"), ("search", "Mara Vell"), ("answer", "1901")]
    assert "2 passages" in turns[0] and "Tide of Ash and Mara Vell" in turns[-1]


def test_a_title_repeated_is_searched_once_and_a_single_title_reads_singular():
    record = QARecord("s", "Is the Seine in France?", ("yes",), gold_titles=("Seine", "Seine"))
    turns = title_trajectory(record)
    assert [TURN.match(t).groups() for t in turns] == [("search", "Seine"), ("answer", "yes")]
    assert "1 passage." in turns[0] and "passage on Seine gives" in turns[-1]


def test_which_records_have_an_oracle():
    world = gym.make("SearchQA-Synthetic-v0", num_entities=300, num_questions=3, cache_dir=False).unwrapped
    assert has_oracle(world.records)
    assert oracle_turns(world.records[0]) == world.world.oracle_trajectory(world.records[0])
    titled = QARecord("t", "Q?", ("a",), gold_titles=("T",))
    assert has_oracle([titled]) and not has_oracle([titled, QARecord("n", "Q?", ("a",))])
    with pytest.raises(ConfigError, match="no gold titles"):
        oracle_turns(QARecord("n", "Q?", ("a",)))


@pytest.mark.shared_data
def test_title_searches_find_the_gold_paragraphs_of_real_hotpotqa_questions():
    env = gym.make("SearchQA-HotpotQA-v0", data_path=str(shared_file("hotpotqa/hotpot_train_sample_hf.jsonl")), limit=40,
                   top_k=1, max_turns=4, cache_dir=False).unwrapped
    shown = searches = answered = 0
    for i, record in enumerate(env.records):
        env.reset(options={"index": i})
        for turn in oracle_turns(record):
            *_, terminated, truncated, info = env.step(turn)
            if info["action"] == "search":
                searches += 1
                shown += info["shown"][0]["id"] in record.gold_docs
        answered += info["reward"]["em"] == 1.0 and terminated
    # Every episode ends on the gold answer; a title's own paragraph comes first for most title queries (89.5%
    # of 200 on this sample), not for all: other paragraphs can name the title more often.
    assert answered == len(env.records)
    assert shown > 0.8 * searches
