"""`offset` and `limit` pick a range of a question file's questions, so that two envs over one file (and its
paragraphs) train and evaluate on disjoint questions."""

import json

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.errors import ConfigError
from tests.helpers import hotpot_record


@pytest.fixture
def hotpot_file(tmp_path):
    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps([hotpot_record(i) for i in range(5)]))
    return str(path)


@pytest.mark.parametrize("env_id", ["SearchQA-HotpotQA-v0", "SearchQA-Custom-v0"])
def test_offset_and_limit_pick_a_range_and_keep_every_paragraph(hotpot_file, env_id):
    whole = gym.make(env_id, data_path=hotpot_file, cache_dir=False).unwrapped
    first = gym.make(env_id, data_path=hotpot_file, limit=2, cache_dir=False).unwrapped
    rest = gym.make(env_id, data_path=hotpot_file, offset=2, cache_dir=False).unwrapped
    middle = gym.make(env_id, data_path=hotpot_file, offset=1, limit=3, cache_dir=False).unwrapped
    assert [r.id for r in first.records] == ["h0", "h1"]
    assert [r.id for r in rest.records] == ["h2", "h3", "h4"]
    assert [r.id for r in middle.records] == ["h1", "h2", "h3"]
    # The paragraphs of every question of the file stay searchable: held-out questions share the corpus.
    assert len(whole.corpus) == len(first.corpus) == len(rest.corpus) == 10


@pytest.mark.parametrize("offset", [5, 9, -1, 1.5, True])
def test_an_offset_that_leaves_no_question_or_is_not_a_count_is_refused(hotpot_file, offset):
    with pytest.raises(ConfigError, match="offset"):
        gym.make("SearchQA-HotpotQA-v0", data_path=hotpot_file, offset=offset, cache_dir=False)
