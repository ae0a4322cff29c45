"""Document rewards on literal cases, each expected value worked out by hand."""

from __future__ import annotations

import math

import pytest

from searchgym.errors import ConfigError
from searchgym.rewards import (
    DOCUMENT_REWARDS,
    doc_ndcg,
    doc_recall,
    exact_match,
    resolve_episode_reward,
    shown_documents,
)


def test_shown_documents_are_distinct_in_first_shown_order():
    assert shown_documents([["a", "b"], [], ["b", "c", "a"], ["d"]]) == ["a", "b", "c", "d"]
    assert shown_documents([]) == []


@pytest.mark.parametrize(
    ("shown", "relevance", "expected"),
    [
        (["a", "b"], {"a": 1, "c": 1}, 1 / 2),
        (["a", "b", "c"], {"a": 1, "c": 2}, 1.0),
        (["x"], {"a": 1}, 0.0),
        ([], {"a": 1}, 0.0),
        (["a"], {"a": 0, "b": 0}, 0.0),  # judged, none relevant: nothing to find
        (["a", "b"], {"a": 0, "b": 1, "c": 1, "d": 1}, 1 / 3),  # a score of 0 is not relevant
    ],
)
def test_doc_recall(shown, relevance, expected):
    assert doc_recall(shown, relevance) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("shown", "relevance", "expected"),
    [
        # The one relevant document first: DCG = IDCG.
        (["a", "x", "y"], {"a": 1}, 1.0),
        # Third of three: (1 / log2(4)) / (1 / log2(2)) = 0.5.
        (["x", "y", "a"], {"a": 1}, 0.5),
        # Grades 2 and 1 shown in the worse order:
        # DCG = 1/log2(2) + 2/log2(3) = 1 + 1.26186; IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.63093.
        (["b", "a"], {"a": 2, "b": 1}, (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))),
        # Three relevant, two shown: the ideal list is cut at the two shown, IDCG = 3 + 2/log2(3).
        (["c", "x"], {"a": 3, "b": 2, "c": 1}, 1 / (3 + 2 / math.log2(3))),
        (["x"], {"a": 1}, 0.0),
        ([], {"a": 1}, 0.0),
        (["a"], {}, 0.0),
        (["a", "b"], {"a": -1, "b": 1}, (1 / math.log2(3)) / 1),  # a negative grade gains nothing
    ],
)
def test_doc_ndcg(shown, relevance, expected):
    assert doc_ndcg(shown, relevance) == pytest.approx(expected)


def test_resolve_episode_reward():
    assert resolve_episode_reward("doc_recall") == (None, doc_recall)
    assert resolve_episode_reward("doc_ndcg") == (None, DOCUMENT_REWARDS["doc_ndcg"])
    assert resolve_episode_reward("em") == (exact_match, None)
    custom = lambda prediction, golds: 0.5  # noqa: E731
    assert resolve_episode_reward(custom) == (custom, None)
    with pytest.raises(ConfigError) as e:
        resolve_episode_reward("recall")
    assert "doc_recall" in str(e.value) and "'em'" in str(e.value)
