"""Calibrating a judge against labelled rounds: agreement and Cohen's kappa per signal.

Labelled-round JSONL (one JSON object per line; the same format for human labels and for the synthetic set
`searchgym.judges.synthetic_labels` builds):

```json
{"id": "q17/r2",
 "question": "In which city is the employer of Puil Togist headquartered?",
 "answers": ["Maheshum"],
 "gold_entities": ["Elzeth Music", "Maheshum"], "gold_docs": ["person-000169-2", "label-000129-1"],
 "gold_titles": ["Puil Togist", "Elzeth Music"], "gold_docs_searchable": true,
 "history": [{"thinking": "...", "query": "...", "docs": [{"id": "...", "title": "...", "text": "..."}]}],
 "round": {"thinking": "...", "query": "...", "docs": [{"id": "...", "title": "...", "text": "..."}]},
 "labels": {"retrieval_utility": 1, "reasoning_correctness": 0},
 "meta": {"kind": "unsupported_claim", "annotator": "synthetic"}}
```

`id`, `question`, `answers`, `round` and `labels` are required; the gold fields (default empty),
`gold_docs_searchable` (default unknown), `history` (default none) and `meta` are optional. `history`
holds the episode's earlier search rounds, oldest first; `round` is the round the labels describe. A
human labeller reads the question, the history and the round, and writes `labels` following the
definitions of u and v in `searchgym.info` (the LLM judge's prompt states them in full).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.corpus import Document
from searchgym.data.records import QARecord
from searchgym.errors import DataError
from searchgym.judges.base import Judge, JudgeRequest, SearchRound, Verdict

__all__ = [
    "CalibrationReport",
    "LabelledRound",
    "SignalReport",
    "agreement",
    "calibrate",
    "cohen_kappa",
    "dump_labelled_round",
    "load_labelled_rounds",
    "write_labelled_rounds",
]

SIGNALS = ("retrieval_utility", "reasoning_correctness", "contribution")


@dataclass(frozen=True)
class LabelledRound:
    id: str
    request: JudgeRequest
    retrieval_utility: int
    reasoning_correctness: int
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def contribution(self) -> int:
        return self.retrieval_utility * self.reasoning_correctness


# -- pure metrics ---------------------------------------------------------------------------------------


def agreement(a: Sequence[int], b: Sequence[int]) -> float:
    """Share of positions where two label sequences are equal; nan for empty sequences."""
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length: {len(a)} vs {len(b)}")
    return sum(x == y for x, y in zip(a, b)) / len(a) if a else math.nan


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float:
    """Cohen's kappa of two binary label sequences: (p_o - p_e) / (1 - p_e).

    p_e is the agreement expected by chance from each rater's rate of 1s. When both raters give one and
    the same label everywhere, p_e = 1 and kappa is undefined: nan is returned (agreement says more).
    """
    p_o = agreement(a, b)
    if not a:
        return math.nan
    pa, pb = sum(a) / len(a), sum(b) / len(b)
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if p_e >= 1.0:
        return math.nan
    return (p_o - p_e) / (1 - p_e)


@dataclass(frozen=True)
class SignalReport:
    signal: str
    n: int
    agreement: float
    kappa: float
    true_positive: int
    false_positive: int
    """The judge said 1 where the label is 0."""
    false_negative: int
    true_negative: int


def signal_report(signal: str, truth: Sequence[int], judged: Sequence[int]) -> SignalReport:
    pairs = list(zip(truth, judged))
    return SignalReport(
        signal=signal,
        n=len(pairs),
        agreement=agreement(truth, judged),
        kappa=cohen_kappa(truth, judged),
        true_positive=sum(t == 1 and j == 1 for t, j in pairs),
        false_positive=sum(t == 0 and j == 1 for t, j in pairs),
        false_negative=sum(t == 1 and j == 0 for t, j in pairs),
        true_negative=sum(t == 0 and j == 0 for t, j in pairs),
    )


@dataclass
class CalibrationReport:
    judge: dict[str, Any]
    n: int
    signals: dict[str, SignalReport]
    failures: int
    """Rounds the judge failed on; they count as labels 0, as they would in training."""
    by_kind: dict[str, dict[str, float]]
    """Per `meta["kind"]`: n and agreement of u and v (for the synthetic set, where kinds are known)."""
    disagreements: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        def clean(x: float) -> float | None:
            return None if isinstance(x, float) and math.isnan(x) else x

        return {
            "judge": self.judge,
            "n": self.n,
            "failures": self.failures,
            "signals": {k: {**vars(s), "agreement": clean(s.agreement), "kappa": clean(s.kappa)} for k, s in self.signals.items()},
            "by_kind": self.by_kind,
            "disagreements": self.disagreements,
        }


def calibrate(judge: Judge, rounds: Sequence[LabelledRound], *, batch_size: int = 64, progress=None) -> CalibrationReport:
    """Run `judge` on every labelled round (in batches) and compare with the labels.

    `progress`, if given, is called with the number of rounds done after each batch (for a progress bar).
    """
    verdicts: list[Verdict] = []
    for start in range(0, len(rounds), batch_size):
        chunk = rounds[start : start + batch_size]
        out = judge.label([r.request for r in chunk])
        if len(out) != len(chunk):
            raise DataError(f"judge {judge.name!r} returned {len(out)} verdicts for {len(chunk)} rounds")
        verdicts.extend(out)
        if progress is not None:
            progress(len(chunk))
    truth = {
        "retrieval_utility": [r.retrieval_utility for r in rounds],
        "reasoning_correctness": [r.reasoning_correctness for r in rounds],
        "contribution": [r.contribution for r in rounds],
    }
    judged = {
        "retrieval_utility": [v.retrieval_utility for v in verdicts],
        "reasoning_correctness": [v.reasoning_correctness for v in verdicts],
        "contribution": [v.contribution for v in verdicts],
    }
    kinds: dict[str, list[int]] = {}
    for i, r in enumerate(rounds):
        kinds.setdefault(str(r.meta.get("kind", "unlabelled")), []).append(i)
    by_kind = {
        kind: {
            "n": len(idx),
            "retrieval_utility": sum(truth["retrieval_utility"][i] == judged["retrieval_utility"][i] for i in idx) / len(idx),
            "reasoning_correctness": sum(truth["reasoning_correctness"][i] == judged["reasoning_correctness"][i] for i in idx) / len(idx),
        }
        for kind, idx in sorted(kinds.items())
    }
    disagreements = [
        {
            "id": r.id,
            "kind": r.meta.get("kind"),
            "label": [r.retrieval_utility, r.reasoning_correctness],
            "judged": [v.retrieval_utility, v.reasoning_correctness],
            "failed": v.failed,
            "analysis": v.analysis,
        }
        for r, v in zip(rounds, verdicts)
        if (r.retrieval_utility, r.reasoning_correctness) != (v.retrieval_utility, v.reasoning_correctness)
    ]
    return CalibrationReport(
        judge=judge.describe(),
        n=len(rounds),
        signals={s: signal_report(s, truth[s], judged[s]) for s in SIGNALS},
        failures=sum(v.failed for v in verdicts),
        by_kind=by_kind,
        disagreements=disagreements,
    )


# -- the JSONL format -----------------------------------------------------------------------------------


def _round_from(obj: Any, where: str) -> SearchRound:
    if not isinstance(obj, dict):
        raise ValueError(f"{where} must be an object with thinking, query and docs")
    docs = obj.get("docs", [])
    if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs):
        raise ValueError(f"{where}.docs must be a list of objects with id, title, text")
    try:
        shown = tuple(Document(str(d["id"]), str(d.get("title", "")), str(d["text"])) for d in docs)
    except KeyError as e:
        raise ValueError(f"{where}.docs: a document lacks {e}") from None
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"{where}.query must be a non-empty string")
    return SearchRound(thinking=str(obj.get("thinking", "")), query=query, docs=shown)


def _label(labels: Any, key: str) -> int:
    value = labels.get(key) if isinstance(labels, dict) else None
    if isinstance(value, bool) or value not in (0, 1):
        raise ValueError(f"labels.{key} must be 0 or 1, got {value!r}")
    return int(value)


def parse_labelled_round(obj: Any) -> LabelledRound:
    """One line's object as a `LabelledRound`; ValueError saying which field is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("each line must be a JSON object")
    for key in ("id", "question", "answers", "round", "labels"):
        if key not in obj:
            raise ValueError(f"missing required field {key!r}")
    answers = obj["answers"]
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not answers:
        raise ValueError("answers must be a non-empty list of strings")
    history = obj.get("history", [])
    if not isinstance(history, list):
        raise ValueError("history must be a list of rounds")
    record = QARecord(
        id=str(obj["id"]),
        question=str(obj["question"]),
        answers=tuple(map(str, answers)),
        gold_entities=tuple(map(str, obj.get("gold_entities", []))),
        gold_docs=tuple(map(str, obj.get("gold_docs", []))),
        gold_titles=tuple(map(str, obj.get("gold_titles", []))),
        source=str(obj.get("source", "calibration")),
    )
    searchable = obj.get("gold_docs_searchable")
    request = JudgeRequest(
        record=record,
        round=_round_from(obj["round"], "round"),
        history=tuple(_round_from(h, f"history[{i}]") for i, h in enumerate(history)),
        turn=len(history),
        gold_docs_searchable=None if searchable is None else bool(searchable),
    )
    meta = obj.get("meta", {})
    return LabelledRound(
        id=record.id,
        request=request,
        retrieval_utility=_label(obj["labels"], "retrieval_utility"),
        reasoning_correctness=_label(obj["labels"], "reasoning_correctness"),
        meta=meta if isinstance(meta, dict) else {"note": meta},
    )


def load_labelled_rounds(path: str | Path) -> list[LabelledRound]:
    """Read a labelled-round JSONL file; `DataError` naming the line of any bad record."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise DataError(f"cannot read labelled rounds: {e.strerror or e}", path=path) from e
    rounds = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rounds.append(parse_labelled_round(json.loads(line)))
        except (ValueError, TypeError) as e:  # JSONDecodeError is a ValueError
            raise DataError(f"{e} (see the format in searchgym.judges.calibration)", path=path, record=f"line {number}") from None
    if not rounds:
        raise DataError("no labelled rounds in the file", path=path)
    return rounds


def _round_dict(rnd: SearchRound) -> dict[str, Any]:
    return {"thinking": rnd.thinking, "query": rnd.query, "docs": [{"id": d.id, "title": d.title, "text": d.text} for d in rnd.docs]}


def dump_labelled_round(lr: LabelledRound) -> dict[str, Any]:
    rec = lr.request.record
    out: dict[str, Any] = {
        "id": lr.id,
        "question": rec.question,
        "answers": list(rec.answers),
        "gold_entities": list(rec.gold_entities),
        "gold_docs": list(rec.gold_docs),
        "gold_titles": list(rec.gold_titles),
    }
    if lr.request.gold_docs_searchable is not None:
        out["gold_docs_searchable"] = lr.request.gold_docs_searchable
    out["history"] = [_round_dict(h) for h in lr.request.history]
    out["round"] = _round_dict(lr.request.round)
    out["labels"] = {"retrieval_utility": lr.retrieval_utility, "reasoning_correctness": lr.reasoning_correctness}
    if lr.meta:
        out["meta"] = dict(lr.meta)
    return out


def write_labelled_rounds(path: str | Path, rounds: Iterable[LabelledRound]) -> int:
    """Write rounds as JSONL (one object per line, keys in a fixed order); returns how many."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as f:
        for lr in rounds:
            f.write(json.dumps(dump_labelled_round(lr), ensure_ascii=False) + "\n")
            n += 1
    return n
