import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.errors import ConfigError
from searchgym.rewards import (
    answer_scores,
    cover_exact_match,
    exact_match,
    f1_score,
    format_valid,
    normalize_answer,
    resolve_answer_reward,
    substring_exact_match,
    token_f1,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an   apple, a pie ", "apple pie"),
        ("U.S.A.", "usa"),
        ("Theatre", "theatre"),  # 'the' only as a whole word
        ("", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_uses_any_gold_and_normalization():
    assert exact_match("the Beatles", ["Beatles", "Fab Four"]) == 1.0
    assert exact_match("Fab  four.", ["Beatles", "Fab Four"]) == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0


def test_cover_em_needs_whole_token_span():
    assert cover_exact_match("it was Paris, France", ["paris"]) == 1.0
    assert cover_exact_match("Parisian", ["Paris"]) == 0.0
    assert cover_exact_match("anything", [""]) == 0.0


def test_subem_is_a_substring_test_on_normalized_text():
    # Search-R1's subem_check / FlashRAG's Sub_ExactMatch: `normalize(gold) in normalize(prediction)`.
    assert substring_exact_match("210", ["21"]) == 1.0
    assert cover_exact_match("210", ["21"]) == 0.0
    assert substring_exact_match("xLady Gaga", ["Lady Gaga"]) == 1.0
    assert cover_exact_match("xLady Gaga", ["Lady Gaga"]) == 0.0
    assert substring_exact_match("Parisian", ["Paris"]) == 1.0
    # Normalization first: case, punctuation and articles go on both sides.
    assert substring_exact_match("It was THE Beatles!", ["beatles"]) == 1.0
    assert substring_exact_match("It was the Beatles", ["The Rolling Stones", "Beatles"]) == 1.0
    assert substring_exact_match("Rolling", ["The Rolling Stones"]) == 0.0
    assert substring_exact_match("Lady", ["Lady Gaga"]) == 0.0
    # As in the official code, a gold answer that normalizes to nothing is in every prediction.
    assert substring_exact_match("anything", ["The"]) == 1.0
    assert substring_exact_match("anything", []) == 0.0
    assert resolve_answer_reward("subem") is substring_exact_match


def test_subem_agrees_with_cover_em_on_whole_tokens():
    pairs = [("it was Paris, France", ["paris"]), ("Parisian", ["Paris"]), ("the 21 pilots", ["21"]), ("210", ["21"])]
    for prediction, golds in pairs:
        # Whole-token cover implies substring containment, never the other way round.
        assert substring_exact_match(prediction, golds) >= cover_exact_match(prediction, golds)


def test_token_f1_worked_example():
    # pred tokens: [barack, obama]; gold tokens: [obama]; precision 1/2, recall 1 -> F1 = 2/3
    f1, p, r = token_f1("Barack Obama", "Obama")
    assert (p, r) == (0.5, 1.0)
    assert f1 == pytest.approx(2 / 3)


def test_token_f1_counts_repeated_tokens_as_a_multiset():
    # pred [x, x, y], gold [x, y, y]: in common one x and one y -> precision 2/3, recall 2/3
    assert token_f1("x x y", "x y y") == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    # pred [x, x], gold [x]: one x in common -> precision 1/2, recall 1
    assert token_f1("x x", "x") == pytest.approx((2 / 3, 0.5, 1.0))


def test_f1_yes_no_must_match_exactly():
    # HotpotQA's evaluator: yes/no answers score only when identical.
    assert f1_score("yes", ["no"]) == 0.0
    assert f1_score("yes it is", ["yes"]) == 0.0
    assert f1_score("Yes.", ["yes"]) == 1.0


def test_f1_numbers_and_best_gold():
    assert f1_score("1,000 people", ["1000"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1_score("New York City", ["NYC", "New York City"]) == 1.0


def test_resolve_answer_reward():
    assert resolve_answer_reward("f1") is f1_score
    fn = lambda p, g: 0.5  # noqa: E731
    assert resolve_answer_reward(fn) is fn
    with pytest.raises(ConfigError, match="unknown answer reward"):
        resolve_answer_reward("bleu")


@pytest.mark.parametrize(
    "turns, ok",
    [
        (["<think>a</think><search>q</search>", "<think>b</think><answer>x</answer>"], True),
        (["<answer>x</answer>"], True),
        (["<search>q</search>"], False),  # never answers
        (["<answer>x</answer>", "<answer>y</answer>"], False),  # answers before the last turn
        (["<think>a<search>q</search></think><answer>x</answer>"], False),  # nested
        (["<search>q</search><search>r</search>", "<answer>x</answer>"], False),  # two actions in a turn
        (["<search>q</search><information>fake</information>", "<answer>x</answer>"], False),
        (["<think>unclosed<answer>x</answer>"], False),
        ([], False),
    ],
)
def test_format_valid(turns, ok):
    assert format_valid(turns) is ok


@pytest.mark.parametrize(
    "prediction, golds",
    [
        ("Henri Becquerel", ("Henri Becquerel", "Becquerel")),
        ("it was becquerel, surely", ("Henri Becquerel", "Becquerel")),
        ("the Tiber", ("Tiber",)),
        ("yes", ("no",)),
        ("no", ("no", "nope")),
        ("", ("",)),
        ("", ("x",)),
        ("a b c", ()),
        ("Paris France", ("paris", "France", "Paris, France")),
        ("the", ("An",)),
    ],
)
def test_answer_scores_are_the_three_metrics(prediction, golds):
    assert answer_scores(prediction, golds) == (exact_match(prediction, golds), f1_score(prediction, golds), cover_exact_match(prediction, golds))


def _search_r1_normalize_answer(s):
    # verl/utils/reward_score/qa_em.py in Search-R1, transcribed.
    import re
    import string

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _search_r1_subem_check(prediction, golden_answers):
    if isinstance(golden_answers, str):
        golden_answers = [golden_answers]
    normalized_prediction = _search_r1_normalize_answer(prediction)
    score = 0
    for golden_answer in golden_answers:
        golden_answer = _search_r1_normalize_answer(golden_answer)
        if golden_answer in normalized_prediction:
            score = 1
            break
    return score


_WORDS = st.sampled_from(["the", "a", "Lady", "Gaga", "21", "210", "x", "Paris,", "paris", "ian", "!", "An", "  "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, max_size=5).map("".join), st.lists(st.lists(_WORDS, max_size=3).map(" ".join), max_size=3))
def test_subem_agrees_with_search_r1s_subem_check(prediction, golds):
    assert substring_exact_match(prediction, golds) == float(_search_r1_subem_check(prediction, golds))
