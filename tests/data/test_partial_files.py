"""Files with bad or missing parts: records without their paragraphs (refused with the way round, or
skipped with one counted warning), files cut off at their source (refused where the file ends inside a
record, saying it looks truncated), and warnings about many records folded into one with a count."""

from __future__ import annotations

import io
import json

import pytest

from searchgym.data import load_dataset_file
from searchgym.errors import DataError

TRUNCATED = "looks truncated"


def two_wiki(rid: str, with_context: bool = True) -> dict:
    row = {
        "_id": rid,
        "type": "compositional",
        "question": f"Who is the mother of the director of film {rid}?",
        "answer": "Małgorzata Braunek",
        "supporting_facts": [[f"{rid} (film)", 0], ["Xawery Żuławski", 0]],
        "evidences": [[rid, "director", "Xawery Żuławski"], ["Xawery Żuławski", "mother", "Małgorzata Braunek"]],
        "context": [[f"{rid} (film)", [f"{rid} is a film by Xawery Żuławski."]],
                    ["Xawery Żuławski", ["His mother was Małgorzata Braunek."]]],
    }
    if not with_context:
        del row["context"]
    return row


def test_records_without_paragraphs_are_refused_with_the_way_round_or_skipped(tmp_path, caplog):
    rows = [two_wiki("A"), two_wiki("B", with_context=False), two_wiki("C"), two_wiki("D", with_context=False)]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    message = str(e.value)
    assert "dev.json, record 1 (id 'B')" in message and "missing required field 'context'" in message
    assert "on_error='skip'" in message and "gym.make" in message
    with caplog.at_level("WARNING", logger="searchgym.data.loaders"):
        ds = load_dataset_file(path, on_error="skip")
    assert [r.id for r in ds.records] == ["A", "C"] and ds.skipped == 2
    (warning,) = [m.getMessage() for m in caplog.records if m.levelname == "WARNING"]
    assert "skipped 2 of 4 records" in warning and "record 1 (id 'B')" in warning and "record 3 (id 'D')" in warning


def test_missing_supporting_titles_are_one_warning_with_a_count(tmp_path, caplog):
    rows = [two_wiki(str(i)) for i in range(5)]
    for row in rows[1:]:
        row["context"] = row["context"][:1]  # the Xawery Żuławski paragraph is gone
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    with caplog.at_level("WARNING", logger="searchgym.data.loaders"):
        ds = load_dataset_file(path)
    assert [len(r.gold_docs) for r in ds.records] == [2, 1, 1, 1, 1]
    assert all(r.gold_titles[1] == "Xawery Żuławski" for r in ds.records)
    (warning,) = [m.getMessage() for m in caplog.records if m.levelname == "WARNING"]
    assert "4 supporting titles are not among their records' context paragraphs" in warning
    assert "record 1: 'Xawery Żuławski'" in warning and "corpus_path" in warning


# ---------------------------------------------------------------------------------- cut-off files


def test_csv_cut_inside_a_quoted_field_is_refused_as_truncated(tmp_path):
    text = 'id,question,golden_answers\n1,Who?,"[""a"", ""b""]"\n2,What?,"[""c"", ""d""]"\n'
    path = tmp_path / "cut.csv"
    path.write_text(text[:-8], encoding="utf-8")  # ends inside the last quoted cell
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    assert "line 3" in str(e.value) and TRUNCATED in str(e.value) and "never closed" in str(e.value)
    ds = load_dataset_file(path, on_error="skip")
    assert ([r.answers for r in ds.records], ds.skipped) == ([("a", "b")], 1)
    # The whole file loads, and so does one without a final newline whose last record is whole.
    path.write_text(text, encoding="utf-8")
    assert [r.answers for r in load_dataset_file(path).records] == [("a", "b"), ("c", "d")]
    path.write_text(text.rstrip("\n"), encoding="utf-8")
    assert len(load_dataset_file(path).records) == 2


def test_tsv_cut_inside_its_last_row_says_so(tmp_path):
    path = tmp_path / "popqa.tsv"
    path.write_text("id\tquestion\tanswer\n1\tWho?\tx\n2\tWhat?", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    assert "line 3" in str(e.value) and "expected 3 tab-separated fields" in str(e.value) and TRUNCATED in str(e.value)
    # A short row in the middle of the file is a bad row, not a cut-off file.
    path.write_text("id\tquestion\tanswer\n1\tWho?\n2\tWhat?\ty\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    assert "line 2" in str(e.value) and TRUNCATED not in str(e.value)


def test_a_last_jsonl_record_cut_between_fields_says_the_file_looks_truncated(tmp_path):
    # The cut left valid JSON: only the missing field tells, and the missing final newline says why.
    path = tmp_path / "nq.jsonl"
    path.write_text(json.dumps({"id": "1", "question": "q?", "golden_answers": ["a"]}) + '\n{"id": "2", "question": "q2?"}')
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    assert "line 2" in str(e.value) and "golden_answers" in str(e.value) and TRUNCATED in str(e.value)


def test_a_parquet_file_without_its_footer_looks_truncated(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    buffer = io.BytesIO()
    rows = [{"id": str(i), "question": f"q{i}?", "golden_answers": ["a"]} for i in range(100)]
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    data = buffer.getvalue()
    path = tmp_path / "train.parquet"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    assert TRUNCATED in str(e.value) and f"after {len(data) // 2} bytes" in str(e.value)
    path.write_bytes(b"not parquet")
    with pytest.raises(DataError) as e:
        load_dataset_file(path)
    assert TRUNCATED not in str(e.value)
