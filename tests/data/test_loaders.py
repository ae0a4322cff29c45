"""Tests of the benchmark loaders (real samples where present, small hand-written files) and the hub fetcher.

`test_layouts.py` checks every accepted layout on files it writes, so a fresh clone covers them too.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import sys
import time
import types
from pathlib import Path

import pytest

from searchgym.data import QADataset, QARecord, fetch_dataset, hub, load_dataset_file, load_records
from searchgym.data.loaders import FORMATS
from searchgym.errors import ConfigError, DataError, DataNotFoundError

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def sample(relative: str) -> Path:
    """A real data sample, or skip when the samples are absent (a user's fresh checkout)."""
    path = SHARED_DATA / relative
    if not path.is_file():
        pytest.skip(
            f"real data sample {relative} not found under {SHARED_DATA} (only present in the development workspace; "
            "tests/data/test_layouts.py tests the same layouts on files it writes)"
        )
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def hotpot_row(rid: str, answer: str = "Paris") -> dict:
    return {
        "_id": rid,
        "question": f"Question {rid}?",
        "answer": answer,
        "type": "bridge",
        "level": "easy",
        "supporting_facts": [["Alpha", 0], ["Beta", 1], ["Alpha", 1]],
        "context": [
            ["Alpha", ["Alpha is a thing.", " It is near Beta."]],
            ["Beta", ["Beta is a city.", " Its capital is Paris."]],
        ],
    }


# ------------------------------------------------------------------------------------ real samples


def assert_gold_docs_in_corpus(ds: QADataset) -> None:
    assert ds.corpus is not None
    for record in ds.records:
        assert record.gold_docs, record.id
        for doc_id in record.gold_docs:
            assert doc_id in ds.corpus, (record.id, doc_id)
        # Two gold paragraphs can share a title (MuSiQue has two "Canon law" paragraphs in one record).
        assert tuple(dict.fromkeys(ds.corpus.get(d).title for d in record.gold_docs)) == record.gold_titles


@pytest.mark.shared_data
def test_hotpotqa_official_sample():
    path = sample("hotpotqa/hotpot_train_sample_official.json")
    ds = load_dataset_file(path)
    assert (ds.format, len(ds.records), len(ds.corpus)) == ("hotpotqa", 100, 994)
    assert ds.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    first = ds.records[0]
    assert first.id == "5a77ec115542992a6e59dff7"
    assert first.question == "If Gallu is a demon Lilu is what?"
    assert first.answers == ("a spirit",)
    assert first.gold_titles == ("Alû", "Lilu (mythology)")
    assert first.gold_docs == ("Alû", "Lilu (mythology)")
    assert first.gold_entities == ("Alû", "Lilu (mythology)", "a spirit")
    assert (first.hops, first.source) == (2, "hotpotqa")
    assert (first.metadata["type"], first.metadata["level"]) == ("bridge", "easy")
    # Sentences carry their own leading spaces: joined with "" they give back the paragraph.
    demon_dice = ds.corpus.get("Demon Dice").text
    assert demon_dice.startswith("Demon Dice, originally published as Chaos Progenitus")
    assert "and Tim Brown. In it, each player" in demon_dice
    assert_gold_docs_in_corpus(ds)
    yes_no = [r for r in ds.records if r.answers[0] in ("yes", "no")]
    assert yes_no and all(r.answers[0] not in r.gold_entities for r in yes_no)


@pytest.mark.shared_data
def test_hotpotqa_hf_sample():
    ds = load_dataset_file(sample("hotpotqa/hotpot_train_sample_hf.jsonl"))
    assert (ds.format, len(ds.records), len(ds.corpus)) == ("hotpotqa_hf", 300, 2958)
    first = ds.records[0]
    assert first.id == "5abf63f15542997ec76fd3ea"
    assert first.answers == ("October 1922",)
    assert first.gold_titles == ("Socialist Revolutionary Party", "Russian Civil War")
    assert first.gold_entities == ("Socialist Revolutionary Party", "Russian Civil War", "October 1922")
    assert first.metadata["level"] == "hard"
    assert_gold_docs_in_corpus(ds)


@pytest.mark.shared_data
def test_musique_sample():
    path = sample("musique/musique_train_sample_official.json")
    ds = load_dataset_file(path)
    assert (ds.format, len(ds.records), len(ds.corpus)) == ("musique", 100, 1890)
    first = ds.records[0]
    assert first.id == "2hop__150763_14904"
    assert first.answers == ("G. Stanley Hall", "Stanley Hall")
    assert first.gold_entities == ("American Psychological Association", "G. Stanley Hall")
    assert first.hops == 2
    assert first.gold_docs == ("Journal of Psychotherapy Integration", "Adolescence")
    assert first.metadata["answerable"] is True
    # Titles with several distinct paragraphs in the file get numbered ids.
    assert "Adolescence (2)" in ds.corpus
    assert ds.corpus.get("Adolescence (2)").title == "Adolescence"
    assert_gold_docs_in_corpus(ds)
    raw = json.loads(path.read_text(encoding="utf-8"))
    for record, row in zip(ds.records, raw, strict=True):
        assert record.hops == len(row["question_decomposition"])
        assert record.gold_entities[-1] == row["answer"]
        step_texts = [
            row["paragraphs"][s["paragraph_support_idx"]]["paragraph_text"].strip()
            for s in row["question_decomposition"]
        ]
        assert [ds.corpus.get(d).text for d in record.gold_docs] == list(dict.fromkeys(step_texts))


@pytest.mark.shared_data
def test_corpus_ids_are_deterministic():
    path = sample("musique/musique_train_sample_official.json")
    a, b = load_dataset_file(path), load_dataset_file(path)
    assert [d.id for d in a.corpus] == [d.id for d in b.corpus]
    assert a.corpus.content_hash == b.corpus.content_hash


@pytest.mark.shared_data
def test_nq_flashrag_sample():
    ds = load_dataset_file(sample("nq/nq_test_sample_flashrag.jsonl"))
    assert (ds.format, len(ds.records), ds.corpus) == ("flashrag", 17, None)
    first = ds.records[0]
    assert (first.id, first.question) == ("test_0", "who got the first nobel prize in physics")
    assert first.answers == ("Wilhelm Conrad Röntgen",)
    assert first.gold_entities == ("Wilhelm Conrad Röntgen",)
    assert first.source == "nq"


@pytest.mark.shared_data
def test_nq_searchr1_parquet_sample():
    path = sample("nq/nq_test_searchr1.parquet")
    ds = load_dataset_file(path)
    assert (ds.format, len(ds.records)) == ("searchr1", 3610)
    first = ds.records[0]
    assert (first.id, first.question) == ("test_0", "who got the first nobel prize in physics?")
    assert first.answers == ("Wilhelm Conrad Röntgen",)
    assert first.source == "nq"
    assert first.metadata["extra_info"] == {"index": 0, "split": "test"}
    assert "prompt" not in first.metadata
    assert [r.id for r in load_records(path, limit=3)] == ["test_0", "test_1", "test_2"]


@pytest.mark.shared_data
def test_triviaqa_sample():
    records = load_records(sample("triviaqa/triviaqa_test_sample_flashrag.jsonl"))
    assert len(records) == 1000
    first = records[0]
    assert first.id == "test_6233"
    assert first.answers[:2] == ("Mark Twain", "Thomas Jefferson Snodgrass")
    assert first.gold_entities == ("Mark Twain",)
    assert first.source == "triviaqa"


@pytest.mark.shared_data
def test_popqa_sample():
    path = sample("popqa/popqa_test_sample_flashrag.jsonl")
    records = load_records(path)
    assert len(records) == 1000
    first = records[0]
    assert (first.id, first.question) == ("test_10207", "Who was the composer of Easy Living?")
    assert first.gold_entities == ("Easy Living", "Ralph Rainger")
    assert first.metadata["prop"] == "composer"
    assert first.source == "popqa"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for record, row in zip(records, rows, strict=True):
        subj, obj = row["metadata"]["subj"], row["metadata"]["obj"]
        # test_14256 asks for the capital of Bradford: subject and object are both "Bradford".
        assert record.gold_entities == ((subj, obj) if subj != obj else (subj,))
    assert load_records(path, source="custom", limit=2)[1].source == "custom"


# ---------------------------------------------------------------------------- hand-written formats


TWO_WIKI = [
    {
        "_id": "a1",
        "type": "compositional",
        "question": "Who is the mother of the director of film Polish-Russian War?",
        "answer": "Małgorzata Braunek",
        "supporting_facts": [["Polish-Russian War (film)", 1], ["Xawery Żuławski", 2]],
        "evidences": [
            ["Polish-Russian War", "director", "Xawery Żuławski"],
            ["Xawery Żuławski", "mother", "Małgorzata Braunek"],
        ],
        "context": [
            [
                "Xawery Żuławski",
                [
                    "Xawery Żuławski (born 1971) is a Polish film director.",
                    "In 1995 he graduated.",
                    "His mother was Małgorzata Braunek.",
                ],
            ],
            [
                "Polish-Russian War (film)",
                ["Polish-Russian War is a 2009 Polish film.", "It was directed by Xawery Żuławski."],
            ],
        ],
    },
    {
        "_id": "a2",
        "type": "comparison",
        "question": "Are both films from the same country?",
        "answer": "yes",
        "supporting_facts": [["Polish-Russian War (film)", 0], ["Other Film", 0]],
        "evidences": [["Polish-Russian War", "country", "Poland"], ["Other Film", "country", "Poland"]],
        "context": [
            ["Polish-Russian War (film)", ["Polish-Russian War is a 2009 Polish film by Xawery Żuławski."]],
            ["Other Film", ["Other Film is a Polish film."]],
            [
                "Xawery Żuławski",
                [
                    "Xawery Żuławski (born 1971) is a Polish film director.",
                    "In 1995 he graduated.",
                    "His mother was Małgorzata Braunek.",
                ],
            ],
        ],
    },
]


def test_2wiki_official_fixture(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(TWO_WIKI, ensure_ascii=False), encoding="utf-8")
    ds = load_dataset_file(path)
    assert ds.format == "2wiki"
    first, second = ds.records
    assert first.gold_entities == (
        "Polish-Russian War (film)",
        "Xawery Żuławski",
        "Polish-Russian War",
        "Małgorzata Braunek",
    )
    assert first.gold_titles == ("Polish-Russian War (film)", "Xawery Żuławski")
    assert first.gold_docs == ("Polish-Russian War (film)", "Xawery Żuławski")
    assert (first.hops, first.source, first.metadata["type"]) == (2, "2wiki", "compositional")
    # Bare sentences are joined with a space; the same paragraph in two records is one document, and a
    # title with two different texts gets a numbered id for the second.
    assert (
        ds.corpus.get("Xawery Żuławski").text
        == "Xawery Żuławski (born 1971) is a Polish film director. In 1995 he graduated. His mother was Małgorzata Braunek."
    )
    assert [d.id for d in ds.corpus] == [
        "Xawery Żuławski",
        "Polish-Russian War (film)",
        "Polish-Russian War (film) (2)",
        "Other Film",
    ]
    assert second.gold_docs == ("Polish-Russian War (film) (2)", "Other Film")
    assert "yes" not in second.gold_entities and second.answers == ("yes",)


def test_numbered_ids_skip_real_titles(tmp_path):
    rows = [hotpot_row("q1"), hotpot_row("q2")]
    rows[1]["context"][0] = ["Alpha", ["A different Alpha paragraph."]]
    rows[1]["context"].append(["Alpha (2)", ["A page really titled Alpha (2)."]])
    ds = load_dataset_file(write_jsonl(tmp_path / "h.jsonl", rows), format="hotpotqa")
    assert sorted(d.id for d in ds.corpus) == ["Alpha", "Alpha (2)", "Alpha (3)", "Beta"]
    assert ds.corpus.get("Alpha (3)").text == "A different Alpha paragraph."
    assert ds.records[1].gold_docs == ("Alpha (3)", "Beta")


def test_hotpotqa_supporting_titles_deduplicated(tmp_path):
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([hotpot_row("q1")]))
    (record,) = load_records(path)
    assert record.gold_titles == ("Alpha", "Beta")
    assert record.gold_entities == ("Alpha", "Beta", "Paris")


def test_musique_jsonl_and_support_order(tmp_path):
    row = {
        "id": "2hop__1_2",
        "question": "Who founded the company that made X?",
        "question_decomposition": [
            {"id": 1, "question": "X >> manufacturer", "answer": "Acme", "paragraph_support_idx": 2},
            {"id": 2, "question": "Who founded #1?", "answer": "Jane Doe", "paragraph_support_idx": 0},
        ],
        "answer": "Jane Doe",
        "answer_aliases": ["J. Doe", "Jane Doe"],
        "answerable": True,
        "paragraphs": [
            {"idx": 0, "title": "Acme", "paragraph_text": "Acme was founded by Jane Doe.", "is_supporting": True},
            {"idx": 1, "title": "Other", "paragraph_text": "Unrelated.", "is_supporting": False},
            {"idx": 2, "title": "X", "paragraph_text": "X is made by Acme. ", "is_supporting": True},
        ],
    }
    ds = load_dataset_file(write_jsonl(tmp_path / "musique_ans_dev.jsonl", [row]))
    (record,) = ds.records
    assert ds.format == "musique"
    assert record.answers == ("Jane Doe", "J. Doe")
    assert record.gold_docs == ("X", "Acme")
    assert record.gold_entities == ("Acme", "Jane Doe")
    assert ds.corpus.get("X").text == "X is made by Acme."


def test_flashrag_multihop_metadata_and_source_guess(tmp_path):
    folder = tmp_path / "hotpotqa"
    folder.mkdir()
    row = {
        "id": "dev_0",
        "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
        "golden_answers": ["yes"],
        "metadata": {
            "type": "comparison",
            "level": "hard",
            "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
        },
    }
    (record,) = load_records(write_jsonl(folder / "dev.jsonl", [row]))
    assert record.source == "hotpotqa"
    assert record.gold_titles == ("Scott Derrickson", "Ed Wood")
    assert record.gold_entities == ("Scott Derrickson", "Ed Wood")
    assert record.hops == 2
    assert record.metadata["level"] == "hard"


def derived(question: str, *answers: str) -> str:
    """The id a record without one gets: 'sha1:' and 12 hex digits over question and answers."""
    return "sha1:" + hashlib.sha1("\x1f".join([question, *answers]).encode()).hexdigest()[:12]


def test_nq_open_gzip_and_derived_ids(tmp_path, caplog):
    path = tmp_path / "NQ-open.dev.jsonl.gz"
    rows = [
        {"question": "where is paris", "answer": ["France", "in France"]},
        {"question": "who wrote hamlet", "answer": ["Shakespeare"]},
        {"question": "who wrote hamlet", "answer": ["Shakespeare"]},
    ]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(rows[0]) + "\n\n" + "".join(json.dumps(r) + "\n" for r in rows[1:]))
    with caplog.at_level("WARNING", logger="searchgym.data.loaders"):
        ds = load_dataset_file(path)
    assert ds.format == "nq_open"
    hamlet = derived("who wrote hamlet", "Shakespeare")
    assert [(r.id, r.answers, r.gold_entities, r.source) for r in ds.records] == [
        (derived("where is paris", "France", "in France"), ("France", "in France"), ("France",), "nq"),
        (hamlet, ("Shakespeare",), ("Shakespeare",), "nq"),
        (hamlet + "-2", ("Shakespeare",), ("Shakespeare",), "nq"),
    ]
    # One warning for the file, with the count.
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "3 records have no id" in warnings[0]
    # Stable: the ids do not depend on the records' positions.
    reordered = tmp_path / "nq_reordered.jsonl"
    write_jsonl(reordered, [rows[1], rows[0]])
    assert [r.id for r in load_records(reordered)] == [hamlet, ds.records[0].id]


def test_searchr1_rows_with_duplicate_ids_across_sources(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {
            "id": "train_0",
            "question": "q nq?",
            "data_source": "nq",
            "prompt": [{"role": "user", "content": "..."}],
            "reward_model": {"ground_truth": {"target": ["a"]}, "style": "rule"},
            "extra_info": {"index": 0, "split": "train"},
        },
        {
            "id": "train_0",
            "question": "q hotpot?",
            "data_source": "hotpotqa",
            "prompt": [{"role": "user", "content": "..."}],
            "reward_model": {"ground_truth": {"target": ["b", "c"]}, "style": "rule"},
            "extra_info": {"index": 1, "split": "train"},
        },
    ]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    records = load_records(path)
    assert [(r.id, r.source, r.answers) for r in records] == [
        ("train_0", "nq", ("a",)),
        ("hotpotqa/train_0", "hotpotqa", ("b", "c")),
    ]


def test_answer_lists_may_be_numpy_arrays():
    np = pytest.importorskip("numpy")
    from searchgym.data.fields import as_str_list

    assert as_str_list(np.array(["x", "y"], dtype=object), "target") == ["x", "y"]


def test_limit_stops_reading_early(tmp_path):
    rows = [{"id": str(i), "question": f"q{i}?", "golden_answers": ["a"]} for i in range(3)]
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "broken", "quest\n')
    assert [r.id for r in load_records(jsonl, limit=3)] == ["0", "1", "2"]
    assert load_records(jsonl, limit=0) == []
    with pytest.raises(DataError):
        load_records(jsonl)
    listing = tmp_path / "x.json"
    listing.write_text(json.dumps(rows)[:-30])
    assert [r.id for r in load_records(listing, limit=1)] == ["0"]


def test_all_formats_named():
    assert set(FORMATS) == {
        "hotpotqa", "hotpotqa_hf", "2wiki", "musique", "popqa", "flashrag", "searchr1", "nq_open", "kilt", "beir"
    }


# ------------------------------------------------------------------------------------------ errors


def test_missing_file(tmp_path):
    with pytest.raises(DataNotFoundError, match="no such file"):
        load_dataset_file(tmp_path / "absent.jsonl")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "absent.jsonl")
    with pytest.raises(DataNotFoundError, match=r"no such file \(a broken symbolic link\)"):
        load_dataset_file(tmp_path / "link.jsonl")


def test_a_path_that_is_not_a_regular_file_says_what_it_is(tmp_path):
    import os

    (tmp_path / "folder.jsonl").mkdir()
    os.mkfifo(tmp_path / "pipe.jsonl")  # reading it would block forever
    for path, kind in ((tmp_path / "pipe.jsonl", r"a named pipe \(FIFO\)"), ("/dev/null", "a character device")):
        with pytest.raises(DataError, match=f"is {kind}, not a regular file: a dataset is one file"):
            load_dataset_file(path)
    # A folder may be a BEIR folder: one that is not says what such a folder holds.
    with pytest.raises(DataError, match=r"no queries.jsonl: a BEIR folder holds corpus.jsonl, queries.jsonl and qrels"):
        load_dataset_file(tmp_path / "folder.jsonl")


def test_lines_ended_by_a_carriage_return_alone_are_named_as_such(tmp_path):
    # Classic Mac line endings: the whole file reads as one line holding every record.
    path = tmp_path / "cr.jsonl"
    records = [{"id": str(i), "question": "q?", "golden_answers": ["a"]} for i in range(2)]
    path.write_bytes(b"\r".join(json.dumps(r).encode() for r in records) + b"\r")
    with pytest.raises(DataError, match=r"at line 1: the lines end in a carriage return alone \(CR"):
        load_dataset_file(path)
    path.write_bytes(b"\r\n".join(json.dumps(r).encode() for r in records) + b"\r\n")  # CRLF is fine
    assert [r.id for r in load_dataset_file(path).records] == ["0", "1"]


def test_bad_arguments(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "question": "q?", "golden_answers": ["a"]}])
    with pytest.raises(ConfigError, match="format"):
        load_dataset_file(path, format="squad")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="limit"):
        load_dataset_file(path, limit=-1)


def test_truncated_jsonl_line(tmp_path):
    path = tmp_path / "trunc.jsonl"
    path.write_text(
        json.dumps({"id": "1", "question": "q?", "golden_answers": ["a"]}) + '\n{"id": "2", "question": "q',
        encoding="utf-8",
    )
    with pytest.raises(DataError) as info:
        load_records(path)
    message = str(info.value)
    assert "trunc.jsonl" in message and "line 2" in message and "truncated" in message


def test_truncated_json_list(tmp_path):
    path = tmp_path / "trunc.json"
    path.write_text(json.dumps([hotpot_row("q1"), hotpot_row("q2"), hotpot_row("q3")])[:-60])
    with pytest.raises(DataError) as info:
        load_records(path)
    message = str(info.value)
    assert "trunc.json" in message and "record 2" in message and "truncated" in message
    assert info.value.record == 2


def test_wrong_typed_field(tmp_path):
    path = write_jsonl(
        tmp_path / "typed.jsonl",
        [{"id": "1", "question": "q?", "golden_answers": ["a"]}, {"id": "2", "question": "q?", "golden_answers": 42}],
    )
    with pytest.raises(DataError) as info:
        load_records(path)
    message = str(info.value)
    assert "typed.jsonl" in message and "line 2" in message and "'2'" in message
    assert "golden_answers" in message and "expected a list" in message


def test_wrong_typed_nested_field(tmp_path):
    row = hotpot_row("q1")
    row["context"][1] = ["Beta", [1, 2]]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps([row]))
    with pytest.raises(DataError, match=r"nested\.json, record 0 \(id 'q1'\).*context\[1\] sentences.*strings"):
        load_records(path)


def test_missing_field(tmp_path):
    row = hotpot_row("q9")
    del row["answer"]
    path = tmp_path / "missing.json"
    path.write_text(json.dumps([hotpot_row("q1"), row]))
    with pytest.raises(DataError) as info:
        load_records(path)
    message = str(info.value)
    assert (
        "missing.json" in message and "record 1 (id 'q9')" in message and "missing required field 'answer'" in message
    )


def test_empty_question_and_no_answer(tmp_path):
    path = write_jsonl(tmp_path / "empty.jsonl", [{"id": "1", "question": "   ", "golden_answers": ["a"]}])
    with pytest.raises(DataError, match=r"empty\.jsonl, record at line 1 \(id '1'\).*empty question"):
        load_records(path)
    path = write_jsonl(tmp_path / "noanswer.jsonl", [{"id": "1", "question": "q?", "golden_answers": ["", " "]}])
    with pytest.raises(DataError, match=r"noanswer\.jsonl, record at line 1.*no gold answer"):
        load_records(path)


def test_latin1_bytes(tmp_path):
    good = json.dumps({"id": "1", "question": "q?", "golden_answers": ["a"]}).encode()
    bad = '{"id": "2", "question": "caf\u00e9?", "golden_answers": ["a"]}'.encode("latin-1")
    path = tmp_path / "latin.jsonl"
    path.write_bytes(good + b"\n" + bad + b"\n")
    with pytest.raises(DataError) as info:
        load_records(path)
    message = str(info.value)
    assert "latin.jsonl" in message and "line 2" in message and "UTF-8" in message
    listing = tmp_path / "latin.json"
    listing.write_bytes(b"[" + good + b",\n" + bad + b"]")
    with pytest.raises(DataError, match=r"latin\.json, record 1: not valid UTF-8"):
        load_records(listing)


def test_unknown_format(tmp_path):
    path = write_jsonl(tmp_path / "odd.jsonl", [{"query": "q?", "label": "a"}])
    with pytest.raises(DataError) as info:
        load_records(path)
    message = str(info.value)
    assert "odd.jsonl" in message and "line 1" in message
    assert "['label', 'query']" in message and "hotpotqa" in message and "musique" in message


def test_unsupported_and_corrupt_containers(tmp_path):
    text = tmp_path / "data.txt"
    text.write_text("question,answer\n")
    with pytest.raises(DataError, match="unsupported file type"):
        load_records(text)
    parquet = tmp_path / "bad.parquet"
    parquet.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="bad.parquet.*parquet"):
        load_records(parquet)
    gz = tmp_path / "cut.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"id": "1", "question": "q?", "golden_answers": ["a"]}\n' * 50)[:-20])
    with pytest.raises(DataError, match="cut.jsonl.gz"):
        load_records(gz)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataError, match="no records"):
        load_records(empty)


def test_record_not_an_object_and_duplicate_ids(tmp_path):
    path = tmp_path / "scalars.json"
    path.write_text(json.dumps([hotpot_row("q1"), 7]))
    with pytest.raises(DataError, match=r"record 1: expected a JSON object"):
        load_records(path)
    path = write_jsonl(tmp_path / "dups.jsonl", [{"id": "1", "question": "q?", "golden_answers": ["a"]}] * 2)
    with pytest.raises(DataError, match=r"line 2.*duplicate record id '1'"):
        load_records(path)


def test_musique_bad_support_index(tmp_path):
    row = {
        "id": "m1",
        "question": "q?",
        "answer": "a",
        "question_decomposition": [{"id": 1, "question": "q", "answer": "a", "paragraph_support_idx": 5}],
        "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "text", "is_supporting": True}],
    }
    path = write_jsonl(tmp_path / "m.jsonl", [row])
    with pytest.raises(DataError, match=r"m\.jsonl, record at line 1 \(id 'm1'\).*paragraph_support_idx 5"):
        load_records(path)


# --------------------------------------------------------------------------------------------- hub


@pytest.fixture
def fake_hub_installed(monkeypatch):
    """Make `import huggingface_hub` succeed without the package; the download itself is monkeypatched."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.ModuleType("huggingface_hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def test_fetch_cache_hit(tmp_path, monkeypatch):
    cached = tmp_path / "nq" / "test.jsonl"
    cached.parent.mkdir()
    cached.write_text('{"id": "test_0", "question": "q?", "golden_answers": ["a"]}\n')

    def no_network(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(hub, "_download", no_network)
    monkeypatch.setattr(hub, "_hub_reachable", no_network)
    assert fetch_dataset("nq", "test", cache_dir=tmp_path) == cached
    assert hub.cache_path("2wiki", "dev", tmp_path) == tmp_path / "2wikimultihopqa" / "dev.jsonl"


def test_fetch_offline_message(tmp_path, monkeypatch, fake_hub_installed):
    monkeypatch.setattr(hub, "_hub_reachable", lambda timeout_s: False)
    monkeypatch.setattr(hub, "_download", lambda *a, **k: pytest.fail("must not download when offline"))
    with pytest.raises(DataNotFoundError) as info:
        fetch_dataset("popqa", "test", cache_dir=tmp_path)
    message = str(info.value)
    assert "cannot be reached" in message
    assert "data_path=" in message
    assert str(tmp_path / "popqa" / "test.jsonl") in message
    assert 'pip install "searchgym[hub]"' in message
    assert "RUC-NLPIR/FlashRAG_datasets/resolve/main/popqa/test.jsonl" in message


def test_fetch_download_failure_and_success(tmp_path, monkeypatch, fake_hub_installed):
    monkeypatch.setattr(hub, "_hub_reachable", lambda timeout_s: True)

    def not_found(source, split, cache_dir, timeout_s):
        raise OSError("404 Client Error: Entry Not Found")

    monkeypatch.setattr(hub, "_download", not_found)
    with pytest.raises(DataNotFoundError, match="404"):
        fetch_dataset("musique", "dev", cache_dir=tmp_path)

    def download(source, split, cache_dir, timeout_s):
        target = cache_dir / source.filename(split)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text('{"id": "1", "question": "q?", "golden_answers": ["a"]}\n')
        return target

    monkeypatch.setattr(hub, "_download", download)
    path = fetch_dataset("musique", "dev", cache_dir=tmp_path)
    assert path == tmp_path / "musique" / "dev.jsonl"
    assert load_records(path, source="musique")[0].source == "musique"


def test_fetch_without_huggingface_hub(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # makes the import fail
    monkeypatch.setattr(hub, "_hub_reachable", lambda timeout_s: pytest.fail("no network check without the package"))
    with pytest.raises(
        DataNotFoundError, match=r'huggingface_hub package is not installed(.|\n)*pip install "searchgym\[hub\]"'
    ):
        fetch_dataset("hotpotqa", "dev", cache_dir=tmp_path)


def test_fetch_respects_hf_hub_offline(tmp_path, monkeypatch, fake_hub_installed):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "_hub_reachable", lambda timeout_s: pytest.fail("HF_HUB_OFFLINE skips the network"))
    with pytest.raises(DataNotFoundError, match="HF_HUB_OFFLINE"):
        fetch_dataset("bamboogle", "test", cache_dir=tmp_path)


def test_fetch_unknown_name_or_split(tmp_path):
    with pytest.raises(ConfigError, match="known: hotpotqa"):
        fetch_dataset("squad", "dev", cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="it has: test"):
        fetch_dataset("popqa", "train", cache_dir=tmp_path)


def test_hub_reachable_fails_fast_on_refused_port(monkeypatch):
    for variable in hub._PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    with socket.socket() as sock:  # a port that was just free: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    assert hub._hub_reachable(1.0) is False
    assert time.monotonic() - start < 1.5


def test_hub_reachable_succeeds_on_listening_port(monkeypatch):
    for variable in hub._PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub._hub_reachable(1.0) is True


def test_records_are_qarecords(tmp_path):
    path = write_jsonl(
        tmp_path / "bamboogle_test.jsonl", [{"id": "b1", "question": "q?", "golden_answers": ["x", "y"]}]
    )
    (record,) = load_records(path)
    assert isinstance(record, QARecord)
    assert (record.source, record.gold_entities) == ("bamboogle", ("x",))
