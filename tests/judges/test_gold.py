"""GoldJudge on hand-built rounds; every expected label is worked out next to the case."""

from pathlib import Path

import pytest

import searchgym.judges

from searchgym.data.records import QARecord
from searchgym.errors import ConfigError
from searchgym.judges import GoldJudge, GoldJudgeConfig
from searchgym.judges.calibration import load_labelled_rounds
from tests.judges.helpers import BRIDGE, doc, req, rnd

J = GoldJudge()
SHIPPED = Path(searchgym.judges.__file__).parent / "data" / "synthetic_rounds.jsonl"

# Round 0 of a good trajectory: rephrases the question, gets Rome's document (gold d1) for the first time.
R0 = rnd("capital of Italy", "d1", "d0", thinking="I need the capital of Italy first.")
# Round 1: follows the bridge entity Rome (grounded by d1) and gets the Tiber (gold d7).
R1 = rnd("Rome river", "d7", "d1", thinking="Rome is the capital of Italy. Which river flows through Rome?")


def labels(request):
    v = J.judge(request)
    return v.retrieval_utility, v.reasoning_correctness, v.contribution


def test_good_trajectory():
    # u: d1 is gold and new. v: mentions no gold name; query words {capital, italy} are all in the question.
    assert labels(req(BRIDGE, R0)) == (1, 1, 1)
    # u: d7 gold and new (d1 again is not). v: Rome is grounded by d1 and is the latest grounded gold entity.
    assert labels(req(BRIDGE, R1, R0)) == (1, 1, 1)


def test_gold_document_already_seen_is_not_novel():
    # Shows d1 again (seen in round 0) and Paris: nothing new and relevant, so u = 0; the query is fine.
    again = rnd("river in Rome", "d1", "d0", thinking="Rome is the capital; what river is in Rome?")
    assert labels(req(BRIDGE, again, R0)) == (0, 1, 0)


def test_guess_before_evidence_is_unsupported():
    # Names Rome before any document showed it: v = 0 although the retrieval (d7, new gold) is useful.
    guess = rnd("Rome river", "d7", thinking="The capital is surely Rome; which river flows through Rome?")
    v = J.judge(req(BRIDGE, guess))
    assert (v.retrieval_utility, v.reasoning_correctness, v.contribution) == (1, 0, 0)
    assert "before any evidence" in v.analysis


def test_repeated_query_is_not_useful():
    # Same query as round 0 after normalization (case, punctuation): v = 0; d1 again: u = 0.
    assert labels(req(BRIDGE, rnd("Capital of ITALY!", "d1"), R0)) == (0, 0, 0)


def test_search_after_all_evidence_found_is_not_useful():
    # d1 and d7 (every gold document) were seen: nothing is missing, so another search gets v = 0.
    assert labels(req(BRIDGE, rnd("Tiber length", "d7", thinking="The Tiber flows through Rome."), R0, R1)) == (0, 0, 0)


def test_query_must_follow_up_revealed_entity():
    # Rome was revealed by d1; a query naming no gold entity no longer counts as progress.
    assert labels(req(BRIDGE, rnd("which river flows", "d8"), R0)) == (0, 0, 0)


def test_off_question_query():
    # No gold entity reached yet and query words {berlin, population} are not in the question: v = 0.
    assert labels(req(BRIDGE, rnd("Berlin population", "d2"))) == (0, 0, 0)


def test_rephrased_retry_after_failed_search_is_useful():
    failed = rnd("capital of Italy", "d0", "d2", thinking="I need the capital of Italy.")
    assert labels(req(BRIDGE, failed)) == (0, 1, 0)
    # Not a repeat; words {italy, capital, city}: 2 of 3 in the question (0.67 >= 0.5). d1 is new gold.
    retry = rnd("Italy capital city", "d1", thinking="That search found nothing; let me rephrase it.")
    assert labels(req(BRIDGE, retry, failed)) == (1, 1, 1)


def test_titles_basis_when_gold_ids_are_not_in_the_corpus():
    # Gold ids from another corpus: relevance by title; documents sharing a title count once.
    record = QARecord("t", BRIDGE.question, ("Tiber",), gold_entities=("Rome", "Tiber"), gold_docs=("x1", "x2"), gold_titles=("Rome", "Tiber"))
    assert J.basis(req(record, R0, searchable=False)) == "titles"
    assert J.basis(req(record, R0, searchable=None)) == "doc_ids"  # unknown: ids are trusted
    first = req(record, R0, searchable=False)
    assert J.judge(first).retrieval_utility == 1
    other_rome = doc("d1b", "Rome", "Rome is built on seven hills.")
    second = rnd("Rome river", other_rome, "d0", thinking="Rome it is. Which river flows through Rome?")
    assert labels(req(record, second, R0, searchable=False)) == (0, 1, 0)
    # Configured explicitly, the basis does not depend on the request.
    assert GoldJudge(GoldJudgeConfig(relevance="titles")).basis(req(record, R0, searchable=True)) == "titles"


def test_answers_basis_for_answer_only_records():
    record = QARecord("nq", "Who discovered radioactivity?", ("Henri Becquerel", "Becquerel"))
    first = rnd("who discovered radioactivity", "d5")  # d5 names Henri Becquerel
    assert J.basis(req(record, first)) == "answers"
    assert labels(req(record, first)) == (1, 1, 1)
    # d6 names Becquerel too, but the answer was already seen: u = 0; nothing is missing: v = 0.
    assert labels(req(record, rnd("Becquerel birthplace", "d6", thinking="Becquerel it is."), first)) == (0, 0, 0)


def test_yes_no_answers_never_count():
    record = QARecord("yn", "Is the Spree a river in Berlin?", ("yes",))
    shown = doc("z", "Notes", "There is no yes or no in this sentence, yes.")
    # Neither relevant (yes/no answers are ignored) nor an ungrounded mention of the answer in the thinking.
    assert labels(req(record, rnd("Spree river Berlin", shown, thinking="yes, probably; let me check"))) == (0, 1, 0)


@pytest.mark.parametrize("kwargs", [{"relevance": "ids"}, {"min_question_overlap": 1.5}])
def test_config_is_validated(kwargs):
    with pytest.raises(ConfigError):
        GoldJudgeConfig(**kwargs)


def test_label_batches_and_describes():
    verdicts = J.label([req(BRIDGE, R0), req(BRIDGE, R1, R0)])
    assert [v.contribution for v in verdicts] == [1, 1]
    assert J.describe()["kind"] == "gold" and J.name == "gold" and J.deferred is False


def test_names_for_gives_titles_and_answers_and_prepares_the_record_at_reset():
    rec = QARecord("yn", "Is Rome the capital of Italy?", ("yes", "Rome"), gold_entities=("Rome",),
                   gold_docs=("d1",), gold_titles=("Rome", "Italy"))
    asked = GoldJudge()
    # Titles, then answers with yes/no left out: what the env's entity matcher also looks for.
    assert asked.names_for(rec) == ("Rome", "Italy", "Rome")
    # Preparing the record early changes no label: the same rounds, judged by a judge never asked.
    first, second = rnd("capital of Italy", "d1", "d0"), rnd("Rome", "d1", thinking="Rome is the capital.")
    for request in (req(rec, first), req(rec, second, first)):
        a, b = asked.judge(request), GoldJudge().judge(request)
        assert (a.retrieval_utility, a.reasoning_correctness, a.analysis) == (b.retrieval_utility, b.reasoning_correctness, b.analysis)
    assert asked.judge(req(rec, first)).retrieval_utility == 1  # d1 is gold and new


def test_an_episode_session_gives_the_verdicts_of_per_round_requests():
    # `start` carries what earlier rounds showed along; `judge` works it out from the request's history.
    # Over the shipped synthetic set (gold and distractor documents, repeats, guesses, off-question
    # queries), under each evidence basis, the two agree on every round, reasons included.
    rounds = load_labelled_rounds(SHIPPED)
    assert len(rounds) == 94 and sum(len(lr.request.history) > 0 for lr in rounds) > 40
    for relevance in ("auto", "titles", "answers"):
        judge = GoldJudge(GoldJudgeConfig(relevance=relevance))
        verdicts = set()
        for lr in rounds:
            request = lr.request
            episode = GoldJudge(judge.config).start(request.record, request.gold_docs_searchable)
            for earlier in request.history:
                episode.label(earlier)
            verdict = episode.label(request.round)
            assert verdict == judge.judge(request)
            verdicts.add((verdict.retrieval_utility, verdict.reasoning_correctness))
        assert verdicts == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_a_subclass_that_redefines_label_is_labelled_through_it():
    class Noting(GoldJudge):
        def label(self, requests):
            return super().label(requests)

    assert Noting().start(BRIDGE) is None
    assert GoldJudge().start(BRIDGE) is not None
