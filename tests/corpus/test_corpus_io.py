import gzip
import json

import pytest

from searchgym.corpus import Corpus, Document, iter_corpus_file, load_corpus, parse_contents
from searchgym.errors import ConfigError, DataError, DataNotFoundError
from tests.helpers import shared_file


def test_parse_contents():
    assert parse_contents('"Evan Morris"\nEvan Morris was a lobbyist.') == ("Evan Morris", "Evan Morris was a lobbyist.")
    assert parse_contents("no title line") == ("", "no title line")
    assert Document("1", "T", "x").contents == '"T"\nx'


@pytest.mark.shared_data
def test_wiki18_sample_loads():
    corpus = load_corpus(shared_file("wiki_corpus/wiki18_sample_1000.jsonl"))
    assert len(corpus) == 1000
    first = corpus[0]
    assert (first.id, first.title) == ("0", "Evan Morris")
    assert first.text.startswith("Evan Morris Evan L. Morris (January 26, 1977")
    assert all(d.title and d.text for d in corpus)


def test_wiki18_layout_loads(tmp_path):
    # wiki-18 as FlashRAG and Search-R1 ship it: {"id": "0", "contents": "\"Title\"\ntext"} per line.
    path = tmp_path / "wiki-18.jsonl"
    rows = [
        {"id": "0", "contents": '"Evan Morris"\nEvan Morris Evan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist.'},
        {"id": "1", "contents": '"Horatio Hale"\nconsisted of an Algonkin vocabulary, gathered from a band of Indians.'},
        {"id": "2", "contents": 'Absalon\ncity of ""Havn"" (English: Harbour), and built there a castle.'},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    corpus = load_corpus(path)
    assert [(d.id, d.title, d.title_quoted) for d in corpus] == [("0", "Evan Morris", True), ("1", "Horatio Hale", True), ("2", "Absalon", False)]
    assert corpus[0].text.startswith("Evan Morris Evan L. Morris (January 26, 1977")
    assert [d.contents for d in corpus] == [r["contents"] for r in rows]


def test_formats_agree(tmp_path):
    docs = [Document("a", "Alpha", "first passage"), Document("b", "Beta", "second\tpassage with a tab")]
    contents = tmp_path / "c.jsonl"
    contents.write_text("".join(json.dumps({"id": d.id, "contents": d.contents}) + "\n" for d in docs))
    titled = tmp_path / "t.jsonl.gz"
    with gzip.open(titled, "wt") as f:
        f.writelines(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in docs)
    tsv = tmp_path / "psgs.tsv"
    tsv.write_text('id\ttext\ttitle\na\tfirst passage\tAlpha\nb\t"second\tpassage with a tab"\tBeta\n')
    for path in (contents, titled, tsv):
        assert list(iter_corpus_file(path)) == docs, path
    assert load_corpus(contents).content_hash == load_corpus(tsv).content_hash


def test_content_hash_changes_with_text():
    a = Corpus([Document("1", "T", "x")])
    b = Corpus([Document("1", "T", "y")])
    assert a.content_hash != b.content_hash


def test_duplicate_ids_rejected():
    with pytest.raises(ConfigError, match="duplicate document id"):
        Corpus([Document("1", "", "x"), Document("1", "", "y")])


@pytest.mark.parametrize(
    "name, body, needle",
    [
        ("trunc.jsonl", '{"id": "1", "contents": "\\"T\\"\\nx"}\n{"id": "2", "conte', "line 2"),
        ("notobj.jsonl", '["a"]\n', "item 0"),
        ("notobj2.jsonl", '{"id": "1", "text": "x"}\n["a"]\n', "line 2"),
        ("badid.jsonl", '{"id": [1], "contents": "x"}\n', "line 1"),
        ("cut.json", '[{"title": "A", "text": "x"}, {"title": "B", "te', "record 1"),
        ("notext.jsonl", '{"id": 1, "body": "x"}\n', "line 1"),
        ("types.jsonl", '{"id": 1, "contents": 5}\n', "line 1"),
        ("short.tsv", "id\ttext\ttitle\n1\tonly text\n", "line 2"),
        ("long.tsv", "id\ttext\ttitle\n1\ta text\tTitle\tstray field\n", "line 2"),
        ("nohdr.tsv", "1\ttext\ttitle\n", "line 1"),
        ("corpus.xml", "<doc/>", "unknown corpus format"),
    ],
)
def test_broken_files_name_file_and_record(tmp_path, name, body, needle):
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(DataError) as e:
        list(iter_corpus_file(path))
    assert name in str(e.value) and needle in str(e.value)


def test_bad_encoding_and_missing(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes('{"id": "1", "contents": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(DataError, match="UTF-8"):
        load_corpus(path)
    with pytest.raises(DataNotFoundError):
        load_corpus(tmp_path / "absent.jsonl")


def test_a_corpus_path_that_is_not_a_regular_file_says_what_it_is(tmp_path):
    # It exists, so "not found" (what it used to say) sent users looking for a missing file.
    (tmp_path / "folder.jsonl").mkdir()
    with pytest.raises(DataError, match="is a folder, not a corpus file") as caught:
        load_corpus(tmp_path / "folder.jsonl")
    assert not isinstance(caught.value, DataNotFoundError)
    with pytest.raises(DataError, match="is a character device, not a corpus file"):
        load_corpus("/dev/null")


def test_a_corpus_with_lines_ended_by_a_carriage_return_alone_loads(tmp_path):
    path = tmp_path / "cr.jsonl"
    path.write_bytes(b'{"id": "1", "contents": "\\"A\\"\\nalpha"}\r{"id": "2", "contents": "\\"B\\"\\nbeta"}\r')
    assert [(d.id, d.title) for d in load_corpus(path)] == [("1", "A"), ("2", "B")]


def test_bare_and_quoted_title_lines_survive_the_document_store_and_the_cache(tmp_path):
    from searchgym.corpus import Corpus, Document
    from searchgym.retrieval.base import Hit
    from searchgym.retrieval.cache import _hits_from_json, _hits_to_json
    from searchgym.retrieval.docstore import DocStore, DocStoreWriter

    docs = [Document("q", "Paris", "Capital of France."), Document("b", "Absalon", "built a castle.", title_quoted=False)]
    writer = DocStoreWriter(tmp_path)
    for doc in docs:
        writer.add(doc)
    writer.close()
    stored = list(DocStore(tmp_path, content_hash=Corpus(docs).content_hash))
    assert stored == docs and [d.contents for d in stored] == ['"Paris"\nCapital of France.', "Absalon\nbuilt a castle."]
    assert [h.doc for h in _hits_from_json(_hits_to_json([Hit(d, 1.0) for d in docs]))] == docs
    # A bare title changes the content hash (an index keyed by it must not serve the quoted form), and
    # only then: quoted corpora keep the hashes they had.
    quoted = Corpus([docs[0], Document("b", "Absalon", "built a castle.")])
    assert Corpus(docs).content_hash != quoted.content_hash
    # The hash the quoted pair had before documents remembered bare titles.
    assert quoted.content_hash == "5e2952a21e96aacc47c4564d31da39d45251bd42358182d516cda37a2cd8b260"


@pytest.mark.parametrize("body", ["", "\n\n", "[]", "[\n]\n"])
@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.json"])
def test_empty_corpus_file_is_an_error_naming_it(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(DataError, match="holds no documents") as e:
        load_corpus(path)
    assert e.value.path == str(path)


def test_empty_tsv_corpus_is_an_error(tmp_path):
    path = tmp_path / "psgs.tsv"
    for body in ("", "id\ttext\ttitle\n"):
        path.write_text(body)
        with pytest.raises(DataError, match="holds no documents"):
            load_corpus(path)


def test_json_list_of_titles_and_texts_without_ids(tmp_path, caplog):
    # The layout several multi-hop retrieval repositories ship: one JSON list, no ids.
    rows = [
        {"title": "Rome", "text": "Rome is the capital city of Italy."},
        {"title": "Tiber", "text": "The Tiber flows through Rome."},
        {"title": "Seine", "text": "The Seine flows through Paris."},
    ]
    path = tmp_path / "musique_corpus.json"
    path.write_text(json.dumps(rows, indent=2))
    with caplog.at_level("WARNING", logger="searchgym.corpus.io"):
        corpus = load_corpus(path)
    assert [(d.id, d.title, d.text) for d in corpus] == [(str(i), r["title"], r["text"]) for i, r in enumerate(rows)]
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "position" in warnings[0].getMessage() and str(path) in warnings[0].getMessage()
    # The same list with ids keeps them (id, _id or idx), and so does jsonl without ids get positions.
    path.write_text(json.dumps([dict(r, idx=10 + i) for i, r in enumerate(rows)]))
    assert [d.id for d in load_corpus(path)] == ["10", "11", "12"]
    lines = tmp_path / "noid.jsonl"
    lines.write_text("".join(json.dumps({"contents": f'"{r["title"]}"\n{r["text"]}'}) + "\n" for r in rows))
    assert [(d.id, d.title) for d in load_corpus(lines)] == [("0", "Rome"), ("1", "Tiber"), ("2", "Seine")]


def test_truncated_only_when_the_json_really_ends_early(tmp_path):
    bad_middle = tmp_path / "middle.jsonl"
    bad_middle.write_text('{"id": "1", "text": "x"}\n{"id": "2", "text": x}\n{"id": "3", "text": "z"}\n')
    with pytest.raises(DataError) as e:
        load_corpus(bad_middle)
    assert "line 2" in str(e.value) and "is the file truncated" not in str(e.value)
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"id": "1", "text": "x"}\n{"id": "2", "te')
    with pytest.raises(DataError, match="is the file truncated") as e:
        load_corpus(cut)
    assert "line 2" in str(e.value)
    valid_list = tmp_path / "list.json"
    valid_list.write_text(json.dumps([{"title": "A", "text": "x"}]))
    assert len(load_corpus(valid_list)) == 1
