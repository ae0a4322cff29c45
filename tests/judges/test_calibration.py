import json
import math

import pytest

from searchgym.cli import main
from searchgym.errors import DataError
from searchgym.judges import GoldJudge
from searchgym.judges.calibration import (
    LabelledRound,
    agreement,
    calibrate,
    cohen_kappa,
    dump_labelled_round,
    load_labelled_rounds,
    write_labelled_rounds,
)
from searchgym.judges.synthetic_labels import DEFAULT_PATH, KIND_LABELS, RELATIONS_NEEDED, build_synthetic_calibration
from tests.judges.helpers import BRIDGE, req, rnd


def test_agreement_and_kappa_literal_cases():
    # p_o = 3/4; rates of 1s 1/2 and 1/4, so p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 1/2.
    assert agreement([1, 1, 0, 0], [1, 0, 0, 0]) == 0.75
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    # Complete disagreement with balanced rates: p_o = 0, p_e = 1/2, kappa = -1.
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    # One label everywhere on both sides: p_e = 1, kappa undefined.
    assert agreement([1, 1], [1, 1]) == 1.0 and math.isnan(cohen_kappa([1, 1], [1, 1]))
    assert math.isnan(agreement([], []))
    with pytest.raises(ValueError):
        agreement([1], [1, 0])


def _labelled(u, v, query="capital of Italy", kind="test"):
    return LabelledRound(f"r-{query}", req(BRIDGE, rnd(query, "d1")), u, v, {"kind": kind})


def test_calibrate_counts_confusion_and_disagreements():
    # GoldJudge gives (1, 1) to each of these rounds; the labels disagree on v for the second.
    rounds = [_labelled(1, 1, "capital of Italy"), _labelled(1, 0, "Italy capital", kind="other")]
    report = calibrate(GoldJudge(), rounds)
    v = report.signals["reasoning_correctness"]
    assert (v.n, v.agreement, v.true_positive, v.false_positive, v.false_negative, v.true_negative) == (2, 0.5, 1, 1, 0, 0)
    assert report.signals["retrieval_utility"].agreement == 1.0
    assert [d["id"] for d in report.disagreements] == ["r-Italy capital"]
    assert report.by_kind["other"]["reasoning_correctness"] == 0.0
    assert json.loads(json.dumps(report.as_dict()))["signals"]["retrieval_utility"]["kappa"] is None  # nan -> null


def test_jsonl_roundtrip_and_errors(tmp_path):
    rounds = [_labelled(1, 0), LabelledRound("h", req(BRIDGE, rnd("Rome river", "d7"), rnd("capital of Italy", "d1")), 1, 1)]
    path = tmp_path / "rounds.jsonl"
    assert write_labelled_rounds(path, rounds) == 2
    back = load_labelled_rounds(path)
    assert [dump_labelled_round(r) for r in back] == [dump_labelled_round(r) for r in rounds]
    assert back[1].request.history[0].docs[0].id == "d1" and back[1].request.gold_docs_searchable is True

    good = json.loads(path.read_text().splitlines()[0])
    for broken, msg in [
        ({**good, "labels": {"retrieval_utility": 2, "reasoning_correctness": 0}}, "retrieval_utility"),
        ({k: v for k, v in good.items() if k != "question"}, "question"),
        ({**good, "round": {"query": "", "docs": []}}, "query"),
        ({**good, "round": {"query": "q", "docs": [{"title": "t"}]}}, "lacks"),
    ]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps(good) + "\n\n" + json.dumps(broken) + "\n")
        with pytest.raises(DataError, match=f"line 3.*{msg}"):
            load_labelled_rounds(bad)
    (tmp_path / "junk.jsonl").write_text("{not json\n")
    with pytest.raises(DataError, match="line 1"):
        load_labelled_rounds(tmp_path / "junk.jsonl")
    with pytest.raises(DataError, match="cannot read"):
        load_labelled_rounds(tmp_path / "missing.jsonl")


def test_shipped_synthetic_set_is_consistent_and_gold_judge_agrees():
    rounds = load_labelled_rounds(DEFAULT_PATH)
    assert len(rounds) >= 80
    for r in rounds:
        assert (r.retrieval_utility, r.reasoning_correctness) == KIND_LABELS[r.meta["kind"]]
    assert set(KIND_LABELS) == {r.meta["kind"] for r in rounds}  # every kind is represented
    report = calibrate(GoldJudge(), rounds)
    assert report.signals["retrieval_utility"].agreement == 1.0
    # GoldJudge's documented blind spot (claims about non-gold entities) is the only source of disagreement.
    assert {d["kind"] for d in report.disagreements} <= {"unsupported_aside", "follows_twin"}


def test_synthetic_set_is_deterministic():
    a = [dump_labelled_round(r) for r in build_synthetic_calibration(num_questions=10, seed=3, num_entities=200)]
    b = [dump_labelled_round(r) for r in build_synthetic_calibration(num_questions=10, seed=3, num_entities=200)]
    assert a == b and len(a) >= 10


def test_need_phrases_cover_every_relation():
    from searchgym.data.synthetic import RELATIONS

    assert set(RELATIONS_NEEDED) == set(RELATIONS)


def test_cli_calibrate(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["judge", "calibrate", "--limit", "20", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "retrieval_utility" in text and "agreement" in text and "labelled rounds: 20" in text
    report = json.loads(out.read_text())
    assert report["n"] == 20 and set(report["signals"]) == {"retrieval_utility", "reasoning_correctness", "contribution"}
    assert main(["judge", "synthetic", "--out", str(tmp_path / "s.jsonl"), "--questions", "4", "--entities", "200"]) == 0
    assert len(load_labelled_rounds(tmp_path / "s.jsonl")) >= 4
