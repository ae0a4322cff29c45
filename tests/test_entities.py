import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchgym.entities import (
    EntityMatcher,
    cache_generation,
    clear_caches,
    contains_phrase,
    entities_in,
    match_rate,
    normalize_entity,
    prepare_gold,
    relative_rates,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Henri Becquerel", "henri becquerel"),
        ("  HENRI\tBecquerel\n", "henri becquerel"),
        ("The Tiber", "tiber"),
        ("an apple a day", "apple day"),
        ("Becquerel's lab", "becquerel s lab"),
        ("Jean-Paul Sartre", "jean paul sartre"),
        ("U.S.A.", "u s"),  # the lone "a" reads as an article; both sides normalize alike, so matching holds
        ("Gödel, Kurt", "godel kurt"),
        ("Théâtre", "theatre"),
        ("The", ""),
        ("", ""),
        ("snake_case", "snake case"),
    ],
)
def test_normalize_entity(text, expected):
    assert normalize_entity(text) == expected


@pytest.mark.parametrize(
    "text, phrase, expected",
    [
        ("romeo and juliet", "rome", False),  # a word inside a longer word is not a match
        ("to rome and back", "rome", True),
        ("in new york city", "new york", True),
        ("new yorker", "new york", False),
        ("rome", "rome", True),
        ("anything", "", False),  # an empty phrase never matches
    ],
)
def test_contains_phrase_is_whole_words(text, phrase, expected):
    assert contains_phrase(text, phrase) is expected


def test_case_punctuation_and_article_variants_match():
    gold = ["Henri Becquerel", "The Glass Meridian", "Jean-Paul Sartre"]
    text = "HENRI BECQUEREL's notes mention glass meridian; so did Jean Paul Sartre."
    assert entities_in(text, gold) == gold
    assert entities_in("Henri and Becquerel, glass-meridians", gold) == []


def test_entities_in_collapses_duplicate_spellings_and_drops_empty():
    assert entities_in("Paris is big", ["Paris", "paris", "The", "PARIS."]) == ["Paris"]


def test_match_rate_and_relative_rates():
    assert match_rate(0, 0) == 0.0
    assert match_rate(1, 4) == 0.25
    with pytest.raises(ValueError):
        match_rate(3, 2)
    # E-GRPO: gamma_i / max_j gamma_j; all zeros when nobody matched anything.
    assert relative_rates([0.5, 0.25, 0.0]) == [1.0, 0.5, 0.0]
    assert relative_rates([0.0, 0.0]) == [0.0, 0.0]
    assert relative_rates([]) == []


def test_matcher_turn_by_turn():
    m = EntityMatcher(["Rome", "Tiber", "rome", "The"])
    assert m.gold == ["Rome", "Tiber"]  # duplicate spelling and empty normalization dropped: m = 2
    first = m.update("I need the capital of Italy.", "capital of Italy", ["Rome Rome is the capital city of Italy."])
    # Rome appears only in the documents: reported there, not matched, gamma stays 0.
    assert first == {"gold": ["Rome", "Tiber"], "matched_thinking": [], "new_in_thinking": [], "in_query": [],
                     "in_docs": ["Rome"], "rate": 0.0}
    second = m.update("ROME is the capital; which river flows through it?", "river Rome Tiber?", ["Tiber The Tiber flows through Rome."])
    assert second["new_in_thinking"] == ["Rome"]
    assert second["in_query"] == ["Rome", "Tiber"]
    assert second["in_docs"] == ["Rome", "Tiber"]
    assert second["rate"] == 0.5
    third = m.update("Rome again, and the answer is the Tiber.", None, [])
    assert third["new_in_thinking"] == ["Tiber"]  # Rome was matched before: not new
    assert third["matched_thinking"] == ["Rome", "Tiber"] and third["rate"] == 1.0
    assert third["in_query"] == [] and third["in_docs"] == []
    assert math.isclose(m.rate, 1.0)


def _reference(text: str) -> str:
    """The normalization spelled out the slow way, to check the fast ASCII path against."""
    import re
    import unicodedata

    decomposed = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    words = re.sub(r"[\W_]+", " ", decomposed.casefold()).split()
    return " ".join(w for w in words if w not in {"a", "an", "the"})


_pieces = st.sampled_from(["a", "an", "the", "The", "A", " ", "-", "'s", "_", ".", "\x00", "\t", "Rome", "é", "Ünïcode", "ß", "İ", "x"])


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_pieces, max_size=20).map("".join)))
def test_fast_normalization_matches_the_reference(text):
    assert normalize_entity.__wrapped__(text) == _reference(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(_pieces, max_size=25).map("".join), st.lists(st.lists(_pieces, min_size=1, max_size=4).map("".join), max_size=4))
def test_phrase_set_agrees_with_normalize_and_contains(text, phrases):
    from searchgym.entities import PhraseSet

    norms = [normalize_entity(p) for p in phrases]
    ps = PhraseSet(norms)
    expected = [i for i, p in enumerate(n for n in norms if n) if contains_phrase(normalize_entity(text), p)]
    assert ps.find(text) == expected


_ascii_pieces = st.sampled_from(["a", "an", "the", "The", "AN", " ", "  ", "-", "'s", "_", ".", "\n", "rome", "Rome", "romes", "x", "x1", "1985", "ax", "thea"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_ascii_pieces, max_size=30).map("".join),
       st.lists(st.one_of(st.lists(_ascii_pieces, min_size=1, max_size=4).map("".join), st.text(max_size=8)), max_size=5))
def test_phrase_set_ascii_regex_agrees_with_normalized_search(text, phrases):
    """Any phrase, normalized or not (spaces, capitals, articles, punctuation): `find` on an ASCII text is
    the padded substring test on the normalized text, which the regex path never computes."""
    from searchgym.entities import PhraseSet, padded

    ps = PhraseSet(phrases)
    expected = [i for i, p in enumerate(p for p in phrases if p) if f" {p} " in padded(text)]
    assert ps.find(text) == expected


def test_phrase_set_prefilter_and_unicode():
    from searchgym.entities import PhraseSet

    ps = PhraseSet(["henri becquerel", "godel"])
    assert ps.find("Nothing relevant here.") == []
    assert ps.find("HENRI-Becquerel's lab") == [0]
    assert ps.find("Henri and Becquerel") == []  # both words present, not as one phrase
    assert ps.find("Kurt Gödel and Henri Becquerel") == [0, 1]  # non-ASCII: normalized, accents dropped
    assert ps.find("henri the becquerel") == [0]  # articles drop out between the words
    assert ps.find("henri_becquerel, henri becquerels") == [0]
    assert ps.find("xhenri becquerel") == []


def test_documents_are_searched_as_title_then_text():
    from searchgym.corpus import Document
    from searchgym.entities import PhraseSet

    ps = PhraseSet(["new york", "york city"])
    doc = Document("d", "New", "York City is large.")
    assert ps.find_document(doc.title, doc.text) == ps.indices("New York City is large.") == (0, 1)
    m = EntityMatcher(["New York", "Boston"])
    assert m.update("", "q", [doc])["in_docs"] == m.update("", "q", ["New York City is large."])["in_docs"] == ["New York"]


def test_matcher_scans_for_extra_names_without_counting_them():
    # `also` names (a judge's titles and answers) share the matcher's scans but are never gold entities.
    m = EntityMatcher(["Rome", "Tiber"], also=["Italy", "rome", "The"])
    assert m.gold == ["Rome", "Tiber"]
    out = m.update("Italy's capital is Rome.", "Italy Tiber", ["Italy: Rome sits on the Tiber."])
    assert out["new_in_thinking"] == ["Rome"] and out["rate"] == 0.5
    assert out["in_query"] == ["Tiber"] and out["in_docs"] == ["Rome", "Tiber"]
    # The same episode without extra names gives the same matches.
    plain = EntityMatcher(["Rome", "Tiber"]).update("Italy's capital is Rome.", "Italy Tiber", ["Italy: Rome sits on the Tiber."])
    assert plain == out


def test_prepared_names_put_gold_first_and_merge_equal_spellings():
    names, phrases, m = prepare_gold(("Rome", "Tiber"), ("the Tiber", "Lazio", "", "Rome"))
    assert names == ("Rome", "Tiber", "Lazio") and phrases.phrases == ("rome", "tiber", "lazio") and m == 2
    assert prepare_gold(("Rome", "Tiber"), ("Lazio",))[1] is prepare_gold(("Rome", "Tiber"), ("Lazio",))[1]


def test_phrase_set_remembers_texts_until_caches_are_cleared():
    _, phrases, _ = prepare_gold(("Rome",), ())
    text = "Rome, again."
    assert phrases.find(text) == [0]
    assert phrases._texts == {text: (0,)}
    found = phrases.find(text)
    found.append(5)  # callers get their own list: the remembered result is not changed
    assert phrases.find(text) == [0]
    generation = cache_generation()
    clear_caches()
    assert phrases._texts == {} and cache_generation() == generation + 1


def test_exact_matching_is_the_verbatim_string():
    # The normalized rule: "The Who" matches "who" (article and case dropped); the exact rule does not.
    normalized = EntityMatcher(["The Who", "Becquerel"])
    assert normalized.update("maybe who? or becquerel's lab", None, [])["matched_thinking"] == ["The Who", "Becquerel"]
    exact = EntityMatcher(["The Who", "Becquerel"], exact=True)
    assert exact.update("maybe who? or becquerel's lab", None, [])["rate"] == 0.0
    # verbatim substrings count, even inside a longer word ("Becquerel's")
    turn = exact.update("The Who met Becquerel's heirs", None, ["the who"])
    assert (turn["matched_thinking"], turn["rate"]) == (["The Who", "Becquerel"], 1.0)
    assert turn["in_docs"] == ["The Who"]  # documents keep the normalized scan


def test_the_env_matches_entities_exactly_when_asked():
    import gymnasium as gym

    from searchgym.errors import ConfigError

    rates = {}
    for mode in ("normalized", "exact"):
        env = gym.make("SearchQA-Synthetic-v0", num_entities=300, num_questions=5, cache_dir=False, entity_match=mode)
        env.reset(seed=0, options={"index": 0})
        gold = env.unwrapped.record.gold_entities[0]
        *_, info = env.step(f"<think>{gold.lower()}</think><search>{gold}</search>")
        rates[mode] = info["entities"]["rate"] > 0
    assert gold.lower() != gold  # synthetic names are capitalized, so lower case is not the verbatim string
    assert rates == {"normalized": True, "exact": False}
    with pytest.raises(ConfigError, match="entity_match"):
        gym.make("SearchQA-Synthetic-v0", num_entities=300, num_questions=5, cache_dir=False, entity_match="fuzzy")
