"""Candidate phrases and their evidence: pure functions on literal text."""

from searchgym.wrappers.candidates import DocView, SearchView, build_candidates, cue_keys, extract_phrases


def test_phrases_join_connectors_and_drop_sentence_initial_words():
    text = "Marie Curie was a physicist. She worked in Paris with Pierre Curie at the University of Paris."
    assert extract_phrases(text) == ["Marie Curie", "Paris", "Pierre Curie", "University of Paris"]


def test_phrases_strip_possessives_and_dedupe_by_normalized_form():
    text = "Drerhelt Studios' headquarters are in Lower Zaekast. The Tiber flows; Tiber is long."
    # "The Tiber" and "Tiber" normalize alike (articles dropped): the first spelling is kept.
    assert extract_phrases(text) == ["Drerhelt Studios", "Lower Zaekast", "The Tiber"]


def test_quoted_titles_and_vouched_or_title_words():
    assert extract_phrases("Who wrote the novel 'Tide of Ash'?") == ["Tide of Ash"]
    # "Rome" opens its sentence but is a document title; "Friends" opens one but also occurs mid-sentence.
    assert extract_phrases("Rome. Friends came. We met Friends.", titles=["Rome"]) == ["Rome", "Friends"]
    assert extract_phrases("Friends came. It rained.") == []


def test_cue_keys_use_five_letter_prefixes_without_the_phrase_or_question_words():
    assert cue_keys("Which record label employs Puil Togist?", exclude=["Puil Togist"]) == {"recor", "label", "emplo"}
    assert cue_keys("Puil Togist works for Elzeth Music, her employer since 1878.", exclude=["Elzeth Music"]) == {
        "puil", "togis", "works", "emplo"}


def _italy_episode():
    rome = DocView("Rome", "Rome is the capital city of Italy and was the centre of the Roman Empire.")
    tiber = DocView("Tiber", "The Tiber is the third-longest river in Italy and flows through Rome.")
    return build_candidates("Which river flows through the capital of Italy?", [SearchView("Italy", (rome, tiber))])


def test_build_candidates_orders_question_then_documents():
    cands = _italy_episode()
    assert [c.text for c in cands.search] == ["Italy", "Rome", "Roman Empire", "Tiber"]
    assert [c.text for c in cands.answer] == ["Rome", "Italy", "Roman Empire", "Tiber"]


def test_evidence_worked_out_by_hand():
    ev = {c.text: c.evidence for c in _italy_episode().answer}
    # Question cues: river, flows, throu(gh), capit(al). The Tiber's sentence holds river, flows, through: 3/4.
    tiber = ev["Tiber"]
    flags = (tiber.in_question, tiber.is_title, tiber.searched, tiber.in_last, tiber.in_top_doc, tiber.on_topic)
    assert flags == (False, True, False, True, False, False)
    assert (tiber.mentions, tiber.cue, tiber.cue_last, tiber.age, tiber.words) == (2, 0.75, 0.75, 0, 1)
    # "Rome": title sentence, its own doc's sentence, and the Tiber's sentence, which scores 3/4.
    assert (ev["Rome"].mentions, ev["Rome"].cue, ev["Rome"].in_top_doc) == (3, 0.75, True)
    # "Roman Empire" shares only "capital" with the question.
    assert ev["Roman Empire"].cue == 0.25
    assert ev["Italy"].in_question and ev["Italy"].searched


def test_on_topic_and_age_across_two_searches():
    first = SearchView("Henri Becquerel", (DocView("Henri Becquerel", "Henri Becquerel was born in Paris in 1852."),))
    second = SearchView("Paris", (DocView("Paris", "Paris is the capital of France."),))
    cands = build_candidates("Where was Henri Becquerel born?", [first, second])
    ev = {c.text: c.evidence for c in cands.answer}
    assert [c.text for c in cands.answer] == ["Paris", "France", "Henri Becquerel"]
    assert ev["France"].age == 0 and ev["Henri Becquerel"].age == 1
    # France is only in the Paris document, whose title was searched: on topic. Paris is in both.
    assert ev["France"].on_topic and ev["Paris"].on_topic
    assert ev["Paris"].cue == 1.0 and ev["Paris"].cue_last == 0.0


def test_no_searches_gives_question_phrases_only():
    cands = build_candidates("Who is the mayor of Port Halvex?", [])
    assert [c.text for c in cands.search] == ["Port Halvex"] == [c.text for c in cands.answer]
    assert cands.search[0].evidence.mentions == 0
