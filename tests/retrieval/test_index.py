import json
import shutil

import numpy as np
import pytest

from searchgym.corpus import Corpus, Document
from searchgym.errors import ConfigError, DataError, DataNotFoundError, IndexIntegrityError, IndexMismatchError
from searchgym.retrieval import DenseIndexConfig, DenseRetriever, EncoderConfig
from searchgym.retrieval.docstore import DocStore
from searchgym.retrieval.index import IndexManifest, build_index, load_index_parts, rebuild_index
from searchgym.retrieval.integrity import STAMP_FILE, file_record
from searchgym.corpus.corpus import ContentHasher
from tests.retrieval.conftest import write_jsonl

QUERIES = ["Which river flows through Rome?", "Who discovered radioactivity?", "largest city of Germany"]


@pytest.fixture
def built(tmp_path, ten_doc_corpus, minilm):
    """A flat index built by streaming a jsonl file; returns (folder, corpus file)."""
    path = write_jsonl(tmp_path / "ten.jsonl", ten_doc_corpus)
    seen = []
    manifest = build_index(path, tmp_path / "idx", encoder=minilm, chunk_size=4, progress=seen.append)
    assert seen == [4, 8, 10] and manifest.num_docs == 10
    return tmp_path / "idx", path


def test_streaming_hash_equals_corpus_hash(ten_doc_corpus):
    h = ContentHasher()
    for d in ten_doc_corpus:
        h.update(d)
    assert h.hexdigest() == ten_doc_corpus.content_hash


FLOAT32_SCORE_TOL = 1e-3
"""Cosine scores of float32 embeddings of one text encoded in different batches agree to about 1e-4."""


def test_build_then_load_gives_the_in_memory_results(built, ten_doc_corpus, minilm):
    folder, _ = built
    manifest = IndexManifest.read(folder)
    assert manifest.corpus_hash == ten_doc_corpus.content_hash
    assert (manifest.index_type, manifest.dim, manifest.docs_stored) == ("flat", 384, True)
    assert manifest.encoder_identity == minilm.describe()
    assert set(manifest.files) == {"docs.jsonl", "docs.offsets.npy", "embeddings.npy", "index.faiss"}

    parts = load_index_parts(folder)
    assert isinstance(parts.embeddings, np.memmap) and parts.embeddings.shape == (10, 384)
    assert isinstance(parts.documents, DocStore) and list(parts.documents) == list(ten_doc_corpus)

    loaded = DenseRetriever.load(folder, encoder=minilm)
    direct = DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=False)
    for a, b in zip(loaded.search(QUERIES, 5), direct.search(QUERIES, 5)):
        # The same documents in the same order; scores equal up to float32 encoder noise: the two encode in
        # different batches, and under load their dot products were seen to differ by 1e-4.
        assert [h.doc for h in a] == [h.doc for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=FLOAT32_SCORE_TOL)
        assert all(x.score >= y.score for x, y in zip(a, a[1:]))
    assert loaded.describe() == direct.describe()


def test_index_built_for_one_corpus_refuses_another(built, ten_doc_corpus, minilm, tmp_path):
    folder, path = built
    other = Corpus([*ten_doc_corpus[:9], Document("d9", "Nobel Prize in Physics", "Awarded yearly in Stockholm.")])
    with pytest.raises(IndexMismatchError, match="different corpus"):
        DenseRetriever.load(folder, corpus=other, encoder=minilm)
    with pytest.raises(IndexMismatchError, match="different corpus"):
        DenseRetriever.load(folder, corpus=Corpus(ten_doc_corpus[:9]), encoder=minilm)
    # The same file, rewritten with other contents: its stamp changed, so it is re-hashed and refused.
    write_jsonl(path, other)
    with pytest.raises(IndexMismatchError, match="different corpus"):
        DenseRetriever.load(folder, corpus_path=path, encoder=minilm)
    # The original corpus, as an in-memory corpus or from another file, is accepted.
    assert (
        DenseRetriever.load(folder, corpus=ten_doc_corpus, encoder=minilm).search(QUERIES[:1], 1)[0][0].doc.id == "d7"
    )
    copy = write_jsonl(tmp_path / "copy.jsonl", ten_doc_corpus)
    assert len(DenseRetriever.load(folder, corpus_path=copy, encoder=minilm).corpus) == 10


def test_index_refuses_another_encoder(built, minilm):
    folder, _ = built
    with pytest.raises(IndexMismatchError, match="encoder"):
        DenseRetriever.load(folder, encoder=EncoderConfig(prefixes="e5"))
    with pytest.raises(IndexMismatchError, match="encoder"):
        DenseRetriever.load(folder, encoder=EncoderConfig(pooling="cls"))
    # dtype and batch size change only rounding: accepted.
    DenseRetriever.load(folder, encoder=EncoderConfig(dtype="float32", batch_size=8))


def test_damaged_or_unfinished_folders_are_detected(built, tmp_path, minilm):
    folder, _ = built
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    np.save(bad / "embeddings.npy", np.zeros((9, 384), dtype=np.float32))
    with pytest.raises(IndexIntegrityError, match="embeddings.npy: holds 13952 bytes, the manifest recorded 15488"):
        load_index_parts(bad, encoder=minilm)
    # Files that agree with a manifest that disagrees with itself: still refused, by the shape check.
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["files"]["embeddings.npy"] = file_record(bad / "embeddings.npy")
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="inconsistent"):
        load_index_parts(bad, encoder=minilm)
    (bad / "manifest.json").unlink()
    with pytest.raises(DataNotFoundError, match="build"):
        load_index_parts(bad)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "format_version": 0}))
    with pytest.raises(IndexMismatchError, match="format"):
        load_index_parts(folder)


def test_manifest_records_each_files_size_and_sha256(built):
    folder, _ = built
    manifest = IndexManifest.read(folder)
    assert manifest.format_version == 2
    for name, record in manifest.files.items():
        data = (folder / name).read_bytes()
        assert record == {"size": len(data), "sha256": __import__("hashlib").sha256(data).hexdigest()}


def _flip_byte(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0x55
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["index.faiss", "embeddings.npy", "docs.jsonl", "docs.offsets.npy"])
def test_a_flipped_byte_in_any_file_is_refused_naming_the_file(built, tmp_path, minilm, name):
    folder, _ = built
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    _flip_byte(bad / name, (bad / name).stat().st_size // 2)
    with pytest.raises(IndexIntegrityError, match=f"{name}: SHA-256 .* differs"):
        load_index_parts(bad, encoder=minilm)
    # verify="size" is the escape hatch for a user who knows better: sizes still agree, so it loads.
    if name == "docs.jsonl":
        load_index_parts(bad, encoder=minilm, verify="size")


def test_hashes_are_checked_once_then_trusted_until_a_file_changes(built, minilm, monkeypatch):
    from searchgym.retrieval import integrity

    folder, _ = built
    hashed = []
    real = integrity.file_record
    monkeypatch.setattr(integrity, "file_record", lambda p: hashed.append(p.name) or real(p))
    load_index_parts(folder, encoder=minilm)
    assert sorted(hashed) == sorted(IndexManifest.read(folder).files) and (folder / STAMP_FILE).is_file()
    hashed.clear()
    load_index_parts(folder, encoder=minilm)
    assert hashed == []  # the fast path: sizes and the stamp
    load_index_parts(folder, encoder=minilm, verify="full")
    assert len(hashed) == 4
    hashed.clear()
    # Rewritten in place with a new mtime (same size, one byte changed): hashed again, and refused.
    target = folder / "index.faiss"
    _flip_byte(target, 200)
    import os

    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(IndexIntegrityError, match="index.faiss"):
        load_index_parts(folder, encoder=minilm)
    assert hashed == ["index.faiss"]


def test_malformed_manifests_are_typed_errors_naming_the_manifest(built, tmp_path):
    folder, _ = built
    good = json.loads((folder / "manifest.json").read_text())
    cases = {
        "num_docs": {**good, "num_docs": "10"},
        "files": {**good, "files": {**good["files"], "index.faiss": 123}},
        "encoder": {**good, "encoder": ["x"]},
        "must list": {**good, "files": {k: v for k, v in good["files"].items() if k != "index.faiss"}},
        "unreadable": {**good, "surprise": 1},
        "index settings": {**good, "index": {**good["index"], "kind": "lsh"}},
    }
    for why, manifest in cases.items():
        bad = tmp_path / why.replace(" ", "_")
        shutil.copytree(folder, bad)
        (bad / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(DataError, match=why) as caught:
            load_index_parts(bad)
        assert "manifest.json" in str(caught.value), why


def test_manifest_cannot_choose_the_encoder_model(built, tmp_path, minilm):
    folder, _ = built
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["encoder"]["model"] = str(tmp_path / "some-model")
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="not allowed.*--allow-encoder"):
        load_index_parts(bad)
    with pytest.raises(ConfigError, match="collection"):
        load_index_parts(bad, allow_encoders=str(tmp_path / "some-model"))
    # Allowed, the manifest's encoder is built (and would be loaded on first use).
    parts = load_index_parts(bad, allow_encoders=[str(tmp_path / "some-model")])
    assert parts.encoder.config.model == str(tmp_path / "some-model")
    # An encoder the caller passes is the caller's choice; it is checked against the manifest's identity.
    assert load_index_parts(folder, encoder=minilm).encoder is minilm


def test_format_1_indexes_still_load_checked_by_size(built, caplog):
    folder, _ = built
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["format_version"] = 1
    manifest["files"] = {k: v["size"] for k, v in manifest["files"].items()}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert load_index_parts(folder).manifest.format_version == 1
    assert "checked by size only" in caplog.text
    with open(folder / "docs.jsonl", "ab") as f:
        f.write(b"x")
    with pytest.raises(IndexIntegrityError, match="docs.jsonl: holds"):
        load_index_parts(folder)


def test_existing_folder_needs_overwrite_and_failed_builds_leave_nothing(built, ten_doc_corpus, minilm, tmp_path):
    folder, path = built
    with pytest.raises(ConfigError, match="overwrite"):
        build_index(path, folder, encoder=minilm)

    def broken():
        yield ten_doc_corpus[0]
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        build_index(broken(), tmp_path / "never", encoder=minilm)
    assert not (tmp_path / "never").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_rebuild_another_index_type_without_reencoding(built, minilm, monkeypatch):
    folder, _ = built
    monkeypatch.setattr(minilm, "encode_passages", lambda texts: pytest.fail("rebuild must not re-encode"))
    manifest = rebuild_index(folder, folder.parent / "hnsw", index=DenseIndexConfig(kind="hnsw"))
    assert manifest.index_type == "hnsw" and manifest.corpus_hash == IndexManifest.read(folder).corpus_hash
    flat = DenseRetriever.load(folder, encoder=minilm)
    hnsw = DenseRetriever.load(folder.parent / "hnsw", encoder=minilm)
    for a, b in zip(flat.search(QUERIES, 3), hnsw.search(QUERIES, 3)):
        assert [h.doc.id for h in a] == [h.doc.id for h in b]


def test_index_without_documents_needs_the_corpus(tmp_path, ten_doc_corpus, minilm):
    build_index(ten_doc_corpus, tmp_path / "nodocs", encoder=minilm, store_docs=False)
    with pytest.raises(ConfigError, match="corpus"):
        DenseRetriever.load(tmp_path / "nodocs", encoder=minilm)
    r = DenseRetriever.load(tmp_path / "nodocs", corpus=ten_doc_corpus, encoder=minilm)
    assert r.search(["Spree"], 1)[0][0].doc.id == "d8"


def test_cli_builds_and_describes_an_index(tmp_path, ten_doc_corpus, minilm, capsys):
    from searchgym.cli import main

    path = write_jsonl(tmp_path / "ten.jsonl", ten_doc_corpus)
    assert (
        main(
            [
                "index",
                "build",
                str(path),
                "--out",
                str(tmp_path / "cli"),
                "--index",
                "hnsw",
                "--hnsw-m",
                "8",
                "--limit",
                "6",
            ]
        )
        == 0
    )
    assert "6 documents" in capsys.readouterr().out
    assert main(["index", "info", str(tmp_path / "cli")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["num_docs"] == 6 and info["index"]["hnsw_m"] == 8 and info["corpus_file"] is None


def test_index_build_honours_threads(tmp_path, ten_doc_corpus, minilm):
    torch = pytest.importorskip("torch")
    from searchgym.cli import main

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        path = write_jsonl(tmp_path / "ten.jsonl", ten_doc_corpus)
        assert main(["index", "build", str(path), "--out", str(tmp_path / "t"), "--threads", "1", "--limit", "3"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def _imported_modules(path) -> set[str]:
    """Every module the file imports, at module level or inside a function."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_index_folders_do_not_import_the_dense_retriever():
    """`dense` imports `index` (to build and open index folders); the way back would be a cycle."""
    from pathlib import Path

    import searchgym.retrieval

    package = Path(searchgym.retrieval.__file__).parent
    for name in ("index.py", "faiss_index.py"):
        assert "searchgym.retrieval.dense" not in _imported_modules(package / name), name
    assert "searchgym.retrieval.index" in _imported_modules(package / "dense.py")
