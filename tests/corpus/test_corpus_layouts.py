"""Corpus layouts from other projects, written here as they ship: corpora keyed by `doc_id`, `docid`, `pid`
or `passage_id` keep their ids; DPR's `psgs_w100.tsv` streams with its ids; the KILT knowledge source
becomes one document per paragraph, with the ids KILT's provenance names."""

from __future__ import annotations

import gzip
import json
from itertools import islice

import pytest

from searchgym.corpus import Document, iter_corpus_file, load_corpus
from searchgym.errors import DataError

PASSAGES = [("Rome", "Rome is the capital city of Italy."), ("Tiber", "The Tiber flows through Rome.")]


@pytest.mark.parametrize("key", ["doc_id", "docid", "pid", "passage_id", "document_id", "corpus_id"])
def test_common_id_fields_are_kept(tmp_path, key, caplog):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({key: f"p{i + 7}", "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(PASSAGES)))
    with caplog.at_level("WARNING", logger="searchgym.corpus.io"):
        assert [d.id for d in load_corpus(path)] == ["p7", "p8"]
    assert not caplog.records


def test_an_id_field_not_read_is_named_in_the_warning(tmp_path, caplog):
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps({"chunk_id": f"c{i}", "title": t, "text": x}) + "\n" for i, (t, x) in enumerate(PASSAGES)))
    with caplog.at_level("WARNING", logger="searchgym.corpus.io"):
        assert [d.id for d in load_corpus(path)] == ["0", "1"]
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "line 1" in warning and "'chunk_id'" in warning and "rename it to 'id'" in warning


# ------------------------------------------------------------------------------------ DPR psgs_w100

PSGS_W100 = (
    "id\ttext\ttitle\n"
    '1\t"Aaron Aaron ( or ; ""Ahärôn"") is a prophet, high priest, and the brother of Moses."\tAaron\n'
    '2\t"God at Sinai granted Aaron the priesthood for himself and his male descendants."\tAaron\n'
    '3\t"The song ""Hey Jude"" was released in 1968."\t"""Hey Jude"""\n'
)
PSGS_DOCS = [
    Document("1", "Aaron", 'Aaron Aaron ( or ; "Ahärôn") is a prophet, high priest, and the brother of Moses.'),
    Document("2", "Aaron", "God at Sinai granted Aaron the priesthood for himself and his male descendants."),
    Document("3", '"Hey Jude"', 'The song "Hey Jude" was released in 1968.'),
]


@pytest.mark.parametrize("gz", [False, True])
def test_dpr_psgs_w100_keeps_its_ids(tmp_path, gz):
    path = tmp_path / ("psgs_w100.tsv.gz" if gz else "psgs_w100.tsv")
    if gz:
        path.write_bytes(gzip.compress(PSGS_W100.encode()))
    else:
        path.write_text(PSGS_W100, encoding="utf-8")
    assert list(load_corpus(path)) == PSGS_DOCS
    # wiki-18's rendering of a DPR passage: the title line quoted, then the text.
    assert load_corpus(path).get("1").contents.startswith('"Aaron"\nAaron Aaron ( or ;')


def test_dpr_tsv_streams_row_by_row(tmp_path):
    path = tmp_path / "psgs_w100.tsv"
    path.write_text(PSGS_W100 + "4\tonly two fields\n", encoding="utf-8")
    # The first documents come before the broken row is read.
    assert list(islice(iter_corpus_file(path), 3)) == PSGS_DOCS
    with pytest.raises(DataError, match="line 5"):
        list(iter_corpus_file(path))


def test_dpr_tsv_cut_inside_its_last_row_says_it_looks_truncated(tmp_path):
    path = tmp_path / "psgs_w100.tsv"
    path.write_text(PSGS_W100 + '4\t"A passage cut in the midd', encoding="utf-8")
    with pytest.raises(DataError) as e:
        list(iter_corpus_file(path))
    assert "line 5" in str(e.value) and "looks truncated" in str(e.value)
    path.write_text(PSGS_W100.replace("\n2\t", "\n2\tx\ty\tz\n2b\t", 1), encoding="utf-8")
    with pytest.raises(DataError) as e:
        list(iter_corpus_file(path))
    assert "looks truncated" not in str(e.value)


def test_tsv_with_other_id_columns(tmp_path):
    path = tmp_path / "collection.tsv"
    path.write_text("pid\ttitle\ttext\n17\tRome\tRome is the capital city of Italy.\n", encoding="utf-8")
    assert list(load_corpus(path)) == [Document("17", "Rome", "Rome is the capital city of Italy.")]
    path.write_text("passage\ttext\n17\tRome\n", encoding="utf-8")
    with pytest.raises(DataError, match="an id column"):
        load_corpus(path)


# ---------------------------------------------------------------------------- KILT knowledge source

KILT_PAGE = {
    "_id": "45267196",
    "wikipedia_id": "45267196",
    "wikipedia_title": "Super Bowl 50 halftime show",
    "text": [
        "Super Bowl 50 halftime show\n",
        "The Super Bowl 50 Halftime Show took place on February 7, 2016. It was headlined by Coldplay.\n",
        "Section::::Background.\n",
        "In 2015, Coldplay announced the show.\n",
        "\n",
    ],
    "anchors": [{"text": "Coldplay", "href": "Coldplay", "paragraph_id": 1, "start": 80, "end": 88}],
    "categories": "Super Bowl halftime shows",
    "history": {"revid": 1, "url": "https://en.wikipedia.org/w/index.php?title=Super%20Bowl%2050%20halftime%20show"},
}


def test_kilt_knowledge_source_pages_become_paragraph_documents(tmp_path):
    other = {"wikipedia_id": 12, "wikipedia_title": "Other", "text": {"paragraph": ["Other\n", "Unrelated text.\n"]}}
    path = tmp_path / "kilt_knowledgesource.json"  # one page per line, as KILT ships it
    path.write_text(json.dumps(KILT_PAGE) + "\n" + json.dumps(other) + "\n")
    title = "Super Bowl 50 halftime show"
    expected = [
        Document("45267196_1", title, "The Super Bowl 50 Halftime Show took place on February 7, 2016. It was headlined by Coldplay."),
        Document("45267196_3", title, "In 2015, Coldplay announced the show."),
        Document("12_1", "Other", "Unrelated text."),
    ]
    assert list(load_corpus(path)) == expected
    listing = tmp_path / "pages.json"
    listing.write_text(json.dumps([KILT_PAGE, other]))
    assert list(load_corpus(listing)) == expected
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(dict(KILT_PAGE, text=["a", 3])) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl, record line 1: a KILT page's 'text' must be a list"):
        load_corpus(bad)


@pytest.mark.shared_data
def test_the_real_wiki18_sample_as_dpr_tsv_reads_the_same(tmp_path):
    import csv

    from tests.helpers import shared_file

    jsonl = load_corpus(shared_file("wiki_corpus/wiki18_sample_1000.jsonl"))
    path = tmp_path / "psgs_w100.tsv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "text", "title"])
        writer.writerows([d.id, d.text, d.title] for d in jsonl)
    tsv = load_corpus(path)
    assert [(d.id, d.title, d.text) for d in tsv] == [(d.id, d.title, d.text) for d in jsonl]


# ----------------------------------------------------------------------------------------- on_error


def test_on_error_skip_leaves_out_unreadable_documents_with_one_warning(tmp_path, caplog):
    lines = [json.dumps({"id": "a", "title": "Rome", "text": "Rome is in Italy."}), '{"id": "b", "title": "Tiber", tex',
             json.dumps({"id": "c", "body": "no text field"}), json.dumps({"id": "a", "title": "Again", "text": "A repeated id."}),
             json.dumps({"id": "d", "title": "Seine", "text": "The Seine flows through Paris."})]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="line 2"):
        load_corpus(path)
    with caplog.at_level("WARNING", logger="searchgym.corpus.io"):
        corpus = load_corpus(path, on_error="skip")
    assert [d.id for d in corpus] == ["a", "d"]
    skipped, repeated = [r.getMessage() for r in caplog.records]
    assert "skipped 2 records" in skipped and "line 2" in skipped and "line 3" in skipped
    # Documents count in file order among those read, as a duplicate id's error names them (line 4 is the 2nd).
    assert "left out 1 documents whose id repeats" in repeated and "document 2 (id 'a')" in repeated
    tsv = tmp_path / "psgs_w100.tsv"
    tsv.write_text(PSGS_W100.replace("\n2\t", "\n2\tbroken\textra\tfields\n2\t", 1) + '4\t"cut sh')
    assert [d.id for d in iter_corpus_file(tsv, on_error="skip")] == ["1", "2", "3"]
    nothing = tmp_path / "nothing.jsonl"
    nothing.write_text("{broken\n")
    with pytest.raises(DataError, match="none of the file's 1 records can be read"):
        load_corpus(nothing, on_error="skip")
