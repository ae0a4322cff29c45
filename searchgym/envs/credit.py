"""Per-episode credit signals for `SearchQAEnv`: judge labels and gold-entity matches, and which judge
labels an episode (`judge="auto"`).

`EpisodeCredit` is created at `reset` and fed every turn. It never raises because of a judge: whatever a
judge does (raise, return the wrong number of verdicts, return something that is not a `Verdict`), the
affected rounds get the documented failure labels (u = v = p = 0, `failed=True`) and are counted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.entities import EntityMatcher
from searchgym.info import EntityMatches, EpisodeSummary, StepInfo, TurnLabels
from searchgym.judges.base import Judge, JudgeRequest, SearchRound, Verdict, empty_turn_labels, to_turn_labels
from searchgym.rewards import actions_valid

logger = logging.getLogger(__name__)


HOW_TO_JUDGE = ("to label rounds pass judge=LLMJudge(backend) (searchgym.judges; any ChatBackend, e.g. "
                "searchgym.backends.openai.OpenAIChatBackend) or judge='gold' (labels by answer-bearing documents)")


def has_gold_evidence(record: QARecord) -> bool:
    """Whether `record` carries what `GoldJudge` needs for labels worth having: gold supporting documents or
    titles (answer-bearing documents alone make a weak judge, so `judge="auto"` leaves such questions out)."""
    return bool(record.gold_docs or record.gold_titles)


def auto_judge(records: Sequence[QARecord]) -> Judge | None:
    """The env's `judge="auto"`: a `GoldJudge` when any question has gold evidence, else None."""
    if not any(has_gold_evidence(r) for r in records):
        return None
    from searchgym.judges.gold import GoldJudge

    return GoldJudge()


def episode_judge(record: QARecord, judge: Judge | None, *, auto: bool) -> tuple[Judge | None, str | None]:
    """The judge of an episode on `record` (the env's `judge`, chosen by `"auto"` when `auto`), or None and
    why there are no labels."""
    if auto and not has_gold_evidence(record):
        return None, (f"question {record.id!r} has no gold supporting documents or titles, which the default judge "
                      f"(judge='auto': GoldJudge) needs; {HOW_TO_JUDGE}")
    if judge is None:
        return None, f"the env was made with judge=None; {HOW_TO_JUDGE}"
    return judge, None


def _checked(verdict: object) -> Verdict:
    """`verdict`, or a failure verdict when a judge returned something else."""
    return verdict if isinstance(verdict, Verdict) else Verdict.failure("exception", f"judge returned a {type(verdict).__name__}")


def safe_label(judge: Judge, requests: Sequence[JudgeRequest]) -> list[Verdict]:
    """`judge.label(requests)`, with every way it can go wrong turned into failure verdicts."""
    if not requests:
        return []
    try:
        verdicts = judge.label(requests)
    except Exception as e:  # noqa: BLE001 - step must not raise for a judge; the failure is recorded instead
        logger.warning("judge %r raised %s: %s; labelling %d round(s) as failed", getattr(judge, "name", "?"), type(e).__name__, e, len(requests))
        return [Verdict.failure("exception", f"{type(e).__name__}: {e}")] * len(requests)
    if not isinstance(verdicts, list) or len(verdicts) != len(requests):
        got = len(verdicts) if isinstance(verdicts, list) else type(verdicts).__name__
        logger.warning("judge %r returned %s verdicts for %d rounds", getattr(judge, "name", "?"), got, len(requests))
        return [Verdict.failure("count_mismatch", f"judge returned {got} verdicts for {len(requests)} rounds")] * len(requests)
    return [_checked(v) for v in verdicts]


class EpisodeCredit:
    """Judge labels and entity matches for one episode, turn by turn."""

    def __init__(self, record: QARecord, judge: Judge | None, *, deferred: bool, match_entities: bool,
                 gold_docs_searchable: bool | None, entity_match: str = "normalized"):
        self.record = record
        self.judge = judge
        self.deferred = deferred
        self.gold_docs_searchable = gold_docs_searchable
        # A judge that looks for names in the same texts (GoldJudge: titles, answers) shares the scans.
        names_for = getattr(judge, "names_for", None)
        also = names_for(record) if callable(names_for) else ()
        self.matcher = EntityMatcher(record.gold_entities, also=also, exact=entity_match == "exact") if match_entities and record.gold_entities else None
        if self.matcher is not None and not self.matcher.gold:
            self.matcher = None  # every gold entity normalizes to nothing: there is nothing to match
        # A synchronous judge that can follow one episode (`start`) labels its rounds in order; the others
        # get a `JudgeRequest` per round. A `start` that raises leaves the per-round requests.
        self.session = None
        start = getattr(judge, "start", None) if judge is not None and not deferred else None
        if callable(start):
            try:
                self.session = start(record, gold_docs_searchable)
            except Exception as e:  # noqa: BLE001 - reset must not fail because of a judge
                logger.warning("judge %r could not start an episode (%s: %s); labelling round by round",
                               getattr(judge, "name", "?"), type(e).__name__, e)
        self.rounds: list[SearchRound] = []
        """The search rounds so far, for the per-round requests' history (not kept with a session)."""
        self.pending: list[tuple[int, JudgeRequest]] = []
        self.labels: list[TurnLabels | None] = []
        """Every turn's labels so far (what the step infos carried)."""

    @property
    def entity_rate(self) -> float | None:
        return None if self.matcher is None else self.matcher.rate

    def search_turn(self, turn: int, thinking: str, query: str, docs: Sequence[Document]) -> tuple[TurnLabels | None, EntityMatches | None]:
        # The observation shows each title with its text, so a match in either counts as "in the shown
        # documents": `update` searches a `Document`'s title and text as one text.
        entities = self.matcher.update(thinking, query, docs) if self.matcher else None
        labels: TurnLabels | None = None
        if self.judge is not None:
            rnd = SearchRound(thinking=thinking, query=query, docs=tuple(docs))
            if self.session is not None:
                labels = to_turn_labels(self._session_label(rnd), self.judge.name, deferred=False)
            else:
                request = JudgeRequest(self.record, rnd, tuple(self.rounds), turn, self.gold_docs_searchable)
                self.rounds.append(rnd)  # the history of later rounds' requests (a session keeps its own)
                if self.deferred:
                    self.pending.append((turn, request))
                    labels = empty_turn_labels(self.judge.name, deferred=True, pending=True)
                else:
                    labels = to_turn_labels(safe_label(self.judge, [request])[0], self.judge.name, deferred=False)
        self.labels.append(labels)
        return labels, entities

    def _session_label(self, rnd: SearchRound) -> Verdict:
        try:
            return _checked(self.session.label(rnd))
        except Exception as e:  # noqa: BLE001 - step must not raise for a judge; the failure is recorded instead
            logger.warning("judge %r raised %s: %s; labelling the round as failed", getattr(self.judge, "name", "?"), type(e).__name__, e)
            return Verdict.failure("exception", f"{type(e).__name__}: {e}")

    def other_turn(self, thinking: str) -> tuple[TurnLabels | None, EntityMatches | None]:
        """An answer or invalid turn: its thinking still counts for entity matching; no judge labels."""
        entities = self.matcher.update(thinking, None, []) if self.matcher else None
        labels = None if self.judge is None else empty_turn_labels(self.judge.name, deferred=self.deferred, pending=False)
        self.labels.append(labels)
        return labels, entities

    def finish(self) -> tuple[list[TurnLabels | None], int]:
        """Every turn's final labels (a deferred judge labels all rounds now, in one batch) and how many
        search turns failed to be labelled."""
        final = list(self.labels)
        if self.judge is not None and self.pending:
            verdicts = safe_label(self.judge, [req for _, req in self.pending])
            for (turn, _), verdict in zip(self.pending, verdicts):
                final[turn] = to_turn_labels(verdict, self.judge.name, deferred=True)
            self.pending = []
        failures = 0
        for lab in final:
            failures += lab is not None and lab["failed"]
        return final, failures

    def summary(self, infos: Sequence[StepInfo], turn_actions: Sequence[str | None], *, answered: bool) -> EpisodeSummary:
        """The episode's summary (`info["episode"]`) from its step infos and each turn's `turn_action`, with
        every turn's final labels (`finish`)."""
        turn_labels, judge_failures = self.finish()
        last = infos[-1]["reward"]
        searches = invalid = 0
        for i in infos:
            searches += i["action"] == "search"
            invalid += i["invalid_action"]
        return {
            "outcome": "answered" if answered else "out_of_turns",
            "turns": len(infos),
            "searches": searches,
            "invalid_actions": invalid,
            "em": last.get("em", 0.0),
            "f1": last.get("f1", 0.0),
            "cover_em": last.get("cover_em", 0.0),
            "subem": last.get("subem", 0.0),
            "format_valid": answered and actions_valid(turn_actions),
            "turn_labels": turn_labels,
            "judge_failures": judge_failures,
            "entity_rate": self.entity_rate,
        }
