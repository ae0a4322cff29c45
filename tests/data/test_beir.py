"""BEIR folders (`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`), written here as BEIR ships them:
the judged queries become questions whose gold documents are the qrels' (score > 0)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from searchgym.corpus import load_corpus
from searchgym.data import load_dataset_file
from searchgym.errors import ConfigError, DataError, DataNotFoundError

CORPUS = [
    {"_id": "4983", "title": "Microstructural development of human newborn cerebral white matter",
     "text": "Alterations of the architecture of cerebral white matter in the developing human brain can affect cortical development.",
     "metadata": {}},
    {"_id": "5836", "title": "Induction of myelodysplasia by myeloid-derived suppressor cells",
     "text": "Myelodysplastic syndromes (MDS) are age-dependent stem cell malignancies.", "metadata": {}},
    {"_id": "7912", "title": "BC1 RNA, the transcript from a master gene for ID element amplification",
     "text": "ID elements are short interspersed elements (SINEs) found in high copy number in many rodent genomes.",
     "metadata": {}},
]
QUERIES = [
    {"_id": "1", "text": "0-dimensional biomaterials show inductive properties.", "metadata": {}},
    {"_id": "3", "text": "1,000 genomes project enables mapping of genetic sequence variation.", "metadata": {}},
    {"_id": "5", "text": "Myelodysplastic syndromes are stem cell malignancies that depend on age.", "metadata": {}},
    {"_id": "13", "text": "5% of perinatal mortality is due to low birth weight.", "metadata": {}},
]
TEST_QRELS = "query-id\tcorpus-id\tscore\n5\t5836\t1\n3\t7912\t2\n3\t4983\t1\n13\t4983\t0\n"


def write_beir(folder: Path, qrels: dict[str, str] | None = None, gz: bool = False) -> Path:
    (folder / "qrels").mkdir(parents=True)
    for name, rows in (("corpus.jsonl", CORPUS), ("queries.jsonl", QUERIES)):
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (folder / name).write_text(text)
    for split, text in (qrels or {"test": TEST_QRELS}).items():
        (folder / "qrels" / f"{split}.tsv").write_text(text)
    return folder


@pytest.mark.parametrize("gz", [False, True])
def test_beir_folder_loads_the_judged_queries(tmp_path, gz):
    folder = write_beir(tmp_path / "scifact", gz=gz)
    ds = load_dataset_file(folder)
    assert (ds.format, ds.corpus, ds.path, dict(ds.datasets)) == ("beir", None, str(folder), {"": 2})
    # Query 1 is not judged in the test split; query 13's only judgment scores 0: neither is a question.
    assert [(r.id, r.question, r.answers, r.gold_docs) for r in ds.records] == [
        ("3", QUERIES[1]["text"], (), ("7912", "4983")),
        ("5", QUERIES[2]["text"], (), ("5836",)),
    ]
    assert dict(ds.records[0].doc_relevance) == {"7912": 2.0, "4983": 1.0}
    assert all(r.source == "scifact" for r in ds.records)
    suffix = ".gz" if gz else ""
    assert ds.corpus_path == str(folder / f"corpus.jsonl{suffix}")
    assert [d.id for d in load_corpus(ds.corpus_path)] == ["4983", "5836", "7912"]
    digest = hashlib.sha256((folder / f"queries.jsonl{suffix}").read_bytes() + (folder / "qrels" / "test.tsv").read_bytes())
    assert ds.sha256 == digest.hexdigest()


def test_beir_splits_and_answers_in_metadata(tmp_path):
    folder = write_beir(tmp_path / "hotpotqa", qrels={"test": TEST_QRELS, "dev": "query-id\tcorpus-id\tscore\n1\t4983\t1\n"})
    queries = [dict(q) for q in QUERIES]
    queries[0]["metadata"] = {"answer": "biomaterials"}
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    assert [r.id for r in load_dataset_file(folder).records] == ["3", "5"]  # test, when there are several
    (dev,) = load_dataset_file(folder, split="dev").records
    assert (dev.id, dev.answers, dev.gold_docs, dev.source) == ("1", ("biomaterials",), ("4983",), "hotpotqa")
    with pytest.raises(DataNotFoundError, match=r"no qrels/train\.tsv; the folder's splits are \['dev', 'test'\]"):
        load_dataset_file(folder, split="train")
    (folder / "qrels" / "test.tsv").unlink()
    (folder / "qrels" / "train.tsv").write_text(TEST_QRELS)
    with pytest.raises(ConfigError, match="pass split="):
        load_dataset_file(folder)


def test_beir_errors_name_the_file_and_line(tmp_path, caplog):
    folder = write_beir(tmp_path / "fiqa", qrels={"test": TEST_QRELS + "5\t7912\tvery\n"})
    with pytest.raises(DataError) as e:
        load_dataset_file(folder)
    assert "test.tsv, record line 6" in str(e.value) and "'score': expected a number" in str(e.value)
    with caplog.at_level("WARNING", logger="searchgym.data.loaders"):
        ds = load_dataset_file(folder, on_error="skip")
    assert (len(ds.records), ds.skipped) == (2, 1)
    warnings = [m.getMessage() for m in caplog.records if m.levelname == "WARNING"]
    assert any("test.tsv: skipped 1 of 5 records that cannot be read as BEIR judgments" in w for w in warnings)
    assert any("1 queries are judged in test.tsv but have no document with score > 0" in w for w in warnings)
    with pytest.raises(DataNotFoundError, match="no queries.jsonl"):
        load_dataset_file(tmp_path)
    with pytest.raises(DataError, match="pass the folder"):
        load_dataset_file(folder / "queries.jsonl", format="beir")
    with pytest.raises(ConfigError, match="single file with no splits"):
        load_dataset_file(folder / "queries.jsonl", split="test")
    headless = write_beir(tmp_path / "headless", qrels={"test": "5\t5836\t1\n3\t7912\t1\n"})
    with pytest.raises(DataError, match="header line 'query-id<TAB>corpus-id<TAB>score'"):
        load_dataset_file(headless)
