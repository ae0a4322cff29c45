"""A labelled calibration set from the synthetic world, where the true labels are known by construction.

For each question of a small `SyntheticWorld`, a trajectory of search rounds is *constructed*: its
thinking, its query and the documents it is shown are chosen, not retrieved, so what each round is (and
hence its labels) is known. Every round has a `kind`:

=====================  ===  ===  ====================================================================
kind                   u    v    the round
=====================  ===  ===  ====================================================================
oracle                 1    1    grounded thinking, the hop's query; shown the hop's fact passage
failed_search          0    1    the same need, a rephrased query; shown only passages without the fact
rephrased_retry        1    1    after a failed search, asks again differently and gets the fact
repeat_search          0    0    repeats the previous query word for word; shown what it saw before
seen_gold_only         0    1    a correct query for the next hop, but shown only an already seen fact
unsupported_claim      1    0    names the next entity before any evidence showed it (a guess), searches on
twin_documents         0    1    a correct query; shown passages of a confusable twin entity (unrelated)
follows_twin           0    0    takes the twin's fact as the answer and searches on from it
off_topic              0    0    looks up an unrelated entity
unsupported_aside      1    0    an oracle round whose thinking adds an invented claim about a non-gold entity
after_answer_found     0    0    every hop is resolved, yet it searches more about the answer
=====================  ===  ===  ====================================================================

`unsupported_aside` and `follows_twin` hold claims about entities that are not gold, which `GoldJudge`
cannot see by design; they are included because real agents do this, so the measured agreement says how
much it matters. Everything is drawn from seeded generators: equal arguments give equal files.

Regenerate the shipped file with `searchgym judge synthetic --out searchgym/judges/data/synthetic_rounds.jsonl`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.data.synthetic import QuestionConfig, SyntheticWorld, WorldConfig, oracle_query
from searchgym.entities import entities_in
from searchgym.judges.base import JudgeRequest, SearchRound
from searchgym.judges.calibration import LabelledRound

__all__ = ["DEFAULT_PATH", "KIND_LABELS", "RELATIONS_NEEDED", "build_synthetic_calibration", "need_phrase"]

DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "synthetic_rounds.jsonl"

KIND_LABELS: dict[str, tuple[int, int]] = {
    "oracle": (1, 1),
    "failed_search": (0, 1),
    "rephrased_retry": (1, 1),
    "repeat_search": (0, 0),
    "seen_gold_only": (0, 1),
    "unsupported_claim": (1, 0),
    "twin_documents": (0, 1),
    "follows_twin": (0, 0),
    "off_topic": (0, 0),
    "unsupported_aside": (1, 0),
    "after_answer_found": (0, 0),
}

_NEED: dict[str, str] = {
    "born_in": "the birthplace of {S}",
    "employer": "the employer of {S}",
    "educated_at": "the university {S} attended",
    "spouse": "the spouse of {S}",
    "founded": "the organisation founded by {S}",
    "headquartered_in": "the headquarters city of {S}",
    "founded_by": "the founder of {S}",
    "created_by": "the creator of {S}",
    "published_by": "the publisher of {S}",
    "located_in": "the country where {S} lies",
    "capital": "the capital of {S}",
    "mayor": "the mayor of {S}",
}


RELATIONS_NEEDED: tuple[str, ...] = tuple(_NEED)
"""The relations the constructed thinking can phrase (a test checks they are all of the world's)."""


def need_phrase(relation: str, name: str) -> str:
    """How the constructed thinking names what a hop looks for, e.g. "the employer of Puil Togist"."""
    return _NEED[relation].format(S=name)


class _Trajectory:
    """Builds one record's rounds; each added round becomes a labelled example with the rounds before it."""

    def __init__(self, world: SyntheticWorld, record: QARecord, rng: np.random.Generator, scenario: str):
        self.world, self.record, self.rng, self.scenario = world, record, rng, scenario
        meta = record.metadata
        self.rels: list[str] = list(meta["chain"])
        self.names: list[str] = list(meta["path_names"])
        self.ids: list[str] = list(meta["path_ids"])
        self.kinds: list[str] = list(meta["path_kinds"])
        self.per = world.config.passages_per_entity
        self.gold_names = list(dict.fromkeys([*self.names, *record.answers]))
        self.rounds: list[SearchRound] = []
        self.out: list[LabelledRound] = []
        path = set(self.ids)
        # Twins of path entities (either way round) are confusable with them, so never used as strangers.
        self.avoid = path | {e.id for e in world.entities if e.twin_of in path}
        self.avoid |= {world.entities.get(i).twin_of for i in self.ids if world.entities.get(i).twin_of}

    # -- documents ---------------------------------------------------------------------------------------

    def fact(self, hop: int) -> Document:
        return self.world.corpus.get(self.record.gold_docs[hop])

    def passages(self, entity_id: str, *, exclude: str | None = None) -> list[Document]:
        docs = [self.world.corpus.get(f"{entity_id}-{k}") for k in range(self.per)]
        return [d for d in docs if d.id != exclude]

    def clean_passages(self, hop: int) -> list[Document]:
        """Passages of the hop's subject other than the fact, naming no later gold entity."""
        later = self.names[hop + 1 :]
        return [d for d in self.passages(self.ids[hop], exclude=self.fact(hop).id) if not entities_in(f"{d.title} {d.text}", later)]

    def stranger(self) -> tuple[str, str, str]:
        """(id, name, kind) of a random entity off the path, no twin of it, whose passages name no gold entity."""
        for _ in range(200):
            e = self.world.entities[int(self.rng.integers(len(self.world.entities)))]
            if e.id in self.avoid:
                continue
            if any(entities_in(f"{d.title} {d.text}", self.gold_names) for d in self.passages(e.id)):
                continue
            if entities_in(" ".join(self.gold_names), [e.name]):
                continue
            return e.id, e.name, e.kind
        raise RuntimeError("no unrelated entity found; use a larger world")

    def distractor(self) -> Document:
        eid, _, _ = self.stranger()
        return self.passages(eid)[int(self.rng.integers(self.per))]

    # -- rounds ------------------------------------------------------------------------------------------

    def need(self, hop: int, name: str | None = None) -> str:
        return need_phrase(self.rels[hop], self.names[hop] if name is None else name)

    def lead(self, hop: int) -> str:
        """The grounded opening of the thinking at `hop`: what the previous hop's fact said."""
        if hop == 0:
            return "Let me work through the question step by step."
        return f"The search result says {self.need(hop - 1)} is {self.names[hop]}."

    def query(self, hop: int) -> str:
        return oracle_query(self.names[hop], self.rels[hop], self.kinds[hop])

    def add(self, kind: str, thinking: str, query: str, docs: list[Document]) -> None:
        rnd = SearchRound(thinking=thinking, query=query, docs=tuple(docs))
        u, v = KIND_LABELS[kind]
        rec = self.record
        request = JudgeRequest(record=rec, round=rnd, history=tuple(self.rounds), turn=len(self.rounds), gold_docs_searchable=True)
        meta = {"kind": kind, "scenario": self.scenario, "annotator": "synthetic-construction"}
        self.out.append(LabelledRound(f"{rec.id}/r{len(self.rounds)}", request, u, v, meta))
        self.rounds.append(rnd)

    def oracle(self, hop: int, kind: str = "oracle", thinking: str | None = None) -> None:
        text = thinking if thinking is not None else f"{self.lead(hop)} Next I need {self.need(hop)}."
        self.add(kind, text, self.query(hop), [self.fact(hop), self.distractor()])

    def failed(self, hop: int) -> bool:
        rest = self.clean_passages(hop)
        if not rest:
            return False
        self.add("failed_search", f"{self.lead(hop)} Next I need {self.need(hop)}.", self.need(hop), [rest[0], self.distractor()])
        self.oracle(hop, "rephrased_retry", f"The search did not show {self.need(hop)}. Let me search again with other words.")
        return True

    def repeat(self, hop: int) -> None:
        last = self.rounds[-1]
        self.add("repeat_search", f"Let me look up {self.need(hop)} once more to be sure.", last.query, list(last.docs))

    def seen_gold_only(self, hop: int) -> bool:
        rest = self.clean_passages(hop)
        if hop == 0 or not rest:
            return False
        self.add("seen_gold_only", f"{self.lead(hop)} Next I need {self.need(hop)}.", self.need(hop), [self.fact(hop - 1), *rest[:1]])
        return True

    def skip(self, hop: int) -> bool:
        """A guess: claims hop's object without evidence and searches the next hop."""
        if hop + 1 >= len(self.rels):
            return False
        lead = self.lead(hop) if hop else ""
        thinking = f"{lead} I am fairly sure {self.need(hop)} is {self.names[hop + 1]}, so no need to check. Next I need {self.need(hop + 1)}."
        self.add("unsupported_claim", thinking.strip(), self.query(hop + 1), [self.fact(hop + 1), self.distractor()])
        return True

    def twin(self, hop: int) -> bool:
        twins = [e for e in self.world.entities if e.twin_of == self.ids[hop]]
        if not twins:
            return False
        twin = twins[0]
        twin_docs = self.passages(twin.id)
        if any(entities_in(f"{d.title} {d.text}", self.gold_names[hop + 1 :]) for d in twin_docs):
            return False
        self.add("twin_documents", f"{self.lead(hop)} Next I need {self.need(hop)}.", self.need(hop), twin_docs[:2])
        objs = self.world.objects(twin.id, self.rels[hop])
        if len(objs) == 1 and hop + 1 < len(self.rels) and objs[0] not in self.ids:
            obj = self.world.entities.get(objs[0])
            thinking = f"The search result says {self.need(hop, twin.name)} is {obj.name}. Next I need {self.need(hop + 1, obj.name)}."
            docs = [d for d in self.passages(obj.id) if not entities_in(f"{d.title} {d.text}", self.gold_names[hop + 1 :])][:2]
            self.add("follows_twin", thinking, oracle_query(obj.name, self.rels[hop + 1], obj.kind), docs or [self.distractor()])
        self.oracle(hop, "rephrased_retry", f"Those documents are about {twin.name}, not {self.names[hop]}. "
                                            f"I still need {self.need(hop)}.")
        return True

    def off_topic(self) -> None:
        eid, name, _ = self.stranger()
        self.add("off_topic", f"Before going on, let me read about {name}.", f"{name} history", self.passages(eid)[:2])

    def aside(self, hop: int) -> None:
        _, name, _ = self.stranger()
        thinking = f"{self.lead(hop)} I also remember that {self.names[hop]} once shared an office with {name}. Next I need {self.need(hop)}."
        self.oracle(hop, "unsupported_aside", thinking)

    def after_answer(self) -> None:
        n = len(self.rels)
        answer_id, answer = self.ids[n], self.names[n]
        docs = [d for d in self.passages(answer_id) if d.id not in set(self.record.gold_docs)][:2]
        thinking = f"The search result says {self.need(n - 1)} is {answer}. Let me read more about {answer} anyway."
        self.add("after_answer_found", thinking, f"{answer} overview", docs)


def _valid_hops(t: _Trajectory, scenario: str) -> list[int]:
    """Hops at which a scenario's special round can be built."""
    n = len(t.rels)
    if scenario == "seen_gold":
        return [h for h in range(1, n) if t.clean_passages(h)]
    if scenario == "retry":
        return [h for h in range(n) if t.clean_passages(h)]
    if scenario == "guess":
        return list(range(n - 1))
    if scenario == "twin":
        return [h for h in range(n) if any(e.twin_of == t.ids[h] for e in t.world.entities)]
    return list(range(n))


def _play(t: _Trajectory, scenario: str, k: int) -> None:
    n = len(t.rels)
    hop = 0
    while hop < n:
        if hop == k:
            if scenario == "guess":
                t.skip(hop)
                hop += 2  # the guessed hop's object is never looked up; the next hop was searched
                continue
            if scenario == "retry" and t.failed(hop) or scenario == "twin" and t.twin(hop):
                hop += 1
                continue
            if scenario == "aside":
                t.aside(hop)
                hop += 1
                continue
            if scenario == "seen_gold":
                t.seen_gold_only(hop)
            elif scenario == "off_topic":
                t.off_topic()
        t.oracle(hop)
        if hop == k and scenario == "repeat":
            t.repeat(hop)
        hop += 1
    if scenario == "extra":
        t.after_answer()


SCENARIOS = ("retry", "repeat", "seen_gold", "guess", "twin", "off_topic", "aside", "extra", "clean")


def build_synthetic_calibration(*, num_questions: int = 36, seed: int = 0, num_entities: int = 400) -> list[LabelledRound]:
    """Labelled rounds from `num_questions` questions (1-3 hops) of `WorldConfig(num_entities, seed)`.

    Scenarios take turns over the questions (`SCENARIOS`); one that cannot be played on a question (a
    guess needs two hops, a twin needs a confusable entity on the path) waits for the next question.
    """
    world = SyntheticWorld.generate(WorldConfig(num_entities=num_entities, seed=seed))
    records = world.questions(QuestionConfig(hops=(1, 2, 3), num_questions=num_questions, split="train", seed=seed))
    rng = np.random.default_rng([seed, 4242])
    out: list[LabelledRound] = []
    # Round robin with deferral: a scenario that cannot be played on this question waits for the next.
    queue = list(SCENARIOS)
    for record in records:
        for j, scenario in enumerate(queue):
            t = _Trajectory(world, record, rng, scenario)
            hops = _valid_hops(t, scenario)
            if hops:
                queue.append(queue.pop(j))
                break
        _play(t, scenario, hops[int(rng.integers(len(hops)))])
        out.extend(t.out)
    return out
