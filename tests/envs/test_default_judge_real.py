"""The default judge on the real sample files: labels where the format carries supporting facts, an
explicit reason where it does not."""

import gymnasium as gym
import pytest

import searchgym  # noqa: F401 - registers the ids
from tests.helpers import shared_file

pytestmark = pytest.mark.shared_data


@pytest.mark.parametrize("env_id, relative", [
    ("SearchQA-HotpotQA-v0", "hotpotqa/hotpot_train_sample_official.json"),
    ("SearchQA-Musique-v0", "musique/musique_train_sample_official.json"),
])
def test_supporting_facts_get_gold_judge_labels_by_default(env_id, relative):
    env = gym.make(env_id, data_path=shared_file(relative), cache_dir=False)
    _, info = env.reset(seed=0)
    assert info["labels_reason"] is None
    _, _, _, _, info = env.step(f"<search>{env.unwrapped.record.question}</search>")
    assert info["labels"]["judge"] == "gold" and info["labels"]["contribution"] in (0, 1)


def test_answer_only_questions_say_why_they_have_no_labels():
    env = gym.make("SearchQA-NQ-v0", data_path=shared_file("nq/nq_test_sample_flashrag.jsonl"),
                   corpus_path=shared_file("wiki_corpus/wiki18_sample_10.jsonl"), cache_dir=False)
    assert env.unwrapped.judge is None
    _, reset_info = env.reset(seed=0)
    reason = reset_info["labels_reason"]
    assert "no gold supporting documents or titles" in reason and "LLMJudge" in reason
    _, _, _, _, info = env.step("<search>anything</search>")
    assert info["labels"] is None and info["labels_reason"] == reason
