"""KILT task files (`*-kilt.jsonl`), written here as KILT releases them: answers kept, provenance as gold
documents (`{wikipedia_id}_{paragraph}`) and titles, and the files KILT ships without questions or answers
refused with the way to get them."""

from __future__ import annotations

import json

import pytest

from searchgym.data import load_dataset_file
from searchgym.errors import DataError
from searchgym.rewards import exact_match


def provenance(wid: str, title: str, start: int, end: int, **extra) -> dict:
    return {"wikipedia_id": wid, "title": title, "section": "Section::::Abstract.", "start_paragraph_id": start,
            "start_character": 0, "end_paragraph_id": end, "end_character": 10, "bleu_score": 1.0,
            "meta": {"annotation_id": "-1", "evidence_span": [], "yes_no_answer": ""}, **extra}


NQ = {
    "id": "-5004457603684974952",
    "input": "who is playing the halftime show at super bowl 2016",
    "meta": {"left_context": "", "mention": "", "obj_surface": [], "partial_evidence": []},
    "output": [
        {"answer": "Coldplay", "meta": {"score": 0}, "provenance": [provenance("45267196", "Super Bowl 50 halftime show", 1, 1)]},
        {"answer": "Beyoncé", "meta": {"score": 0}, "provenance": [provenance("45267196", "Super Bowl 50 halftime show", 1, 1)]},
        {"answer": "Coldplay with special guest performers Beyoncé and Bruno Mars", "meta": {"score": 0}, "provenance": []},
        # An annotation without an answer still carries provenance.
        {"answer": "", "meta": {"score": 0}, "provenance": [provenance("45267196", "Super Bowl 50 halftime show", 1, 2)]},
    ],
}
HOTPOT = {
    "id": "5a8b57f25542995d1e6f1371",
    "input": "Were Scott Derrickson and Ed Wood of the same nationality?",
    "output": [
        {"answer": "yes"},
        {"provenance": [provenance("2383217", "Scott Derrickson", 1, 1), provenance("10133", "Ed Wood", 1, 1)]},
    ],
    "meta": {},
}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_kilt_nq_keeps_answers_and_provenance(tmp_path):
    ds = load_dataset_file(write_jsonl(tmp_path / "nq-dev-kilt.jsonl", [NQ]))
    assert (ds.format, dict(ds.datasets), ds.corpus) == ("kilt", {"nq": 1}, None)
    (record,) = ds.records
    assert record.id == "-5004457603684974952" and record.source == "nq"
    assert record.answers == ("Coldplay", "Beyoncé", "Coldplay with special guest performers Beyoncé and Bruno Mars")
    assert record.gold_docs == ("45267196_1", "45267196_2")
    assert record.gold_titles == ("Super Bowl 50 halftime show",)
    assert record.gold_entities == ("Super Bowl 50 halftime show", "Coldplay")
    assert record.metadata["meta"]["mention"] == ""
    assert exact_match("Beyonce", record.answers) == 0.0 and exact_match("beyoncé", record.answers) == 1.0


def test_kilt_hotpotqa_yes_no_and_two_pages(tmp_path):
    ds = load_dataset_file(write_jsonl(tmp_path / "hotpotqa-dev-kilt.jsonl", [HOTPOT]))
    (record,) = ds.records
    assert (dict(ds.datasets), record.answers, record.hops) == ({"hotpotqa": 1}, ("yes",), 2)
    assert record.gold_docs == ("2383217_1", "10133_1")
    assert record.gold_titles == ("Scott Derrickson", "Ed Wood")
    assert record.gold_entities == ("Scott Derrickson", "Ed Wood")  # yes/no names no entity


def test_kilt_triviaqa_without_questions_and_test_files_without_answers_are_refused(tmp_path):
    ids_only = {"id": "tc_1553", "output": [{"answer": "Argentina", "provenance": []}]}
    ids_only["input"] = ""
    with pytest.raises(DataError) as e:
        load_dataset_file(write_jsonl(tmp_path / "triviaqa-dev_id-kilt.jsonl", [ids_only]), format="kilt")
    assert "line 1 (id 'tc_1553')" in str(e.value) and "question_id" in str(e.value)
    test_file = write_jsonl(tmp_path / "nq-test_without_answers-kilt.jsonl", [{"id": "1", "input": "who?"}])
    with pytest.raises(DataError) as e:
        load_dataset_file(test_file, format="kilt")
    assert "dev split" in str(e.value)
    only_provenance = {"id": "2", "input": "who?", "output": [{"answer": "", "provenance": []}]}
    with pytest.raises(DataError, match="no gold answer"):
        load_dataset_file(write_jsonl(tmp_path / "x-kilt.jsonl", [only_provenance]))


def test_kilt_bad_provenance_names_the_field(tmp_path):
    bad = json.loads(json.dumps(NQ))
    bad["output"][0]["provenance"][0]["end_paragraph_id"] = 0  # before the start paragraph
    with pytest.raises(DataError, match=r"output\[0\]\.provenance\[0\]: paragraph range 1\.\.0"):
        load_dataset_file(write_jsonl(tmp_path / "nq-dev-kilt.jsonl", [bad]))
    del bad["output"][0]["provenance"][0]["wikipedia_id"]
    with pytest.raises(DataError, match="missing required field 'wikipedia_id'"):
        load_dataset_file(write_jsonl(tmp_path / "nq-dev-kilt.jsonl", [bad]))
