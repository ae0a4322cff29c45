import numpy as np
import pytest

from searchgym.corpus import Corpus, Document
from searchgym.errors import ConfigError
from searchgym.retrieval import (
    DenseIndexConfig,
    DenseRetriever,
    EncoderConfig,
    Retriever,
    TextEncoder,
    resolve_retriever,
)
from searchgym.retrieval.faiss_index import passage_text


def test_encoder_config_is_validated():
    with pytest.raises(ConfigError, match="prefixes"):
        EncoderConfig(prefixes="bge")
    with pytest.raises(ConfigError, match="batch_size"):
        EncoderConfig(batch_size=0)
    with pytest.raises(ConfigError, match="pq_m"):
        DenseIndexConfig(kind="flat", pq_m=8)
    with pytest.raises(ConfigError, match="kind"):
        DenseIndexConfig(kind="annoy")
    with pytest.raises(ConfigError, match="device"):
        EncoderConfig(device="")


def test_an_unusable_device_is_a_config_error(minilm):
    with pytest.raises(ConfigError, match="device"):
        TextEncoder(EncoderConfig(device="no-such-device")).encode_queries(["q"])


def test_embeddings_are_unit_length_and_ignore_padding(minilm):
    short, long = (
        "Paris",
        "The Seine is a river in northern France that flows through Paris into the English Channel. " * 3,
    )
    together = minilm.encode_passages([short, long])
    alone = np.stack([minilm.encode_passages([short])[0], minilm.encode_passages([long])[0]])
    assert together.shape == (2, 384) and together.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # Mean pooling must skip pad tokens: a text batched with a longer one embeds as it does alone
    # (up to bf16 rounding, which is far below the distance between different texts).
    assert np.min(np.sum(together * alone, axis=1)) > 0.999
    assert float(together[0] @ together[1]) < 0.9


def test_e5_prefixes_are_applied(minilm):
    e5 = TextEncoder(EncoderConfig(prefixes="e5"))
    e5._model, e5._tokenizer = minilm._model, minilm._tokenizer  # same weights, no second load
    np.testing.assert_allclose(
        e5.encode_queries(["capital of Italy"]), minilm.encode_passages(["query: capital of Italy"]), atol=1e-6
    )
    np.testing.assert_allclose(e5.encode_passages(["Rome"]), minilm.encode_passages(["passage: Rome"]), atol=1e-6)
    assert e5.describe() != minilm.describe()


def test_dense_flat_equals_brute_force_inner_product(ten_doc_corpus, minilm):
    r = DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=False)
    assert isinstance(r, Retriever)
    queries = ["Which river flows through Rome?", "Who discovered radioactivity?", "German capital"]
    hits = r.search(queries, 4)
    passages = minilm.encode_passages([passage_text(d) for d in ten_doc_corpus])
    scores = minilm.encode_queries(queries) @ passages.T
    for row, got in zip(scores, hits):
        expected = np.argsort(-row, kind="stable")[:4]
        assert [h.doc.id for h in got] == [ten_doc_corpus[int(i)].id for i in expected]
        np.testing.assert_allclose([h.score for h in got], row[expected], atol=1e-5)
    assert (
        hits[0][0].doc.title == "Tiber" and hits[1][0].doc.title == "Radioactivity" and hits[2][0].doc.title == "Berlin"
    )
    assert r.search(queries[:1], 100)[0].__len__() == 10  # k is clamped to the corpus
    assert r.search(queries[:1], 0) == [[]] and r.search([], 3) == []


@pytest.mark.parametrize(
    "config", [DenseIndexConfig(kind="hnsw"), DenseIndexConfig(kind="ivf", ivf_nlist=2, nprobe=2)], ids=["hnsw", "ivf"]
)
def test_approximate_indexes_match_flat_on_a_small_corpus(ten_doc_corpus, minilm, config):
    flat = DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=False)
    approx = DenseRetriever(ten_doc_corpus, encoder=minilm, index=config, cache_dir=False)
    queries = ["river Berlin", "Nobel Prize 1903", "physicist born in Paris"]
    for a, b in zip(flat.search(queries, 5), approx.search(queries, 5)):
        assert [h.doc.id for h in a] == [h.doc.id for h in b]
    assert approx.describe()["index"]["kind"] == config.kind


def test_ivf_pq_needs_a_divisor_of_the_dimension(ten_doc_corpus, minilm):
    with pytest.raises(ConfigError, match="divide"):
        DenseRetriever(ten_doc_corpus, encoder=minilm, index=DenseIndexConfig(kind="ivf", pq_m=7), cache_dir=False)


def test_cached_index_is_reused_and_keyed_by_content(tmp_path, ten_doc_corpus, minilm, monkeypatch):
    first = DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=tmp_path)
    (folder,) = (tmp_path / "dense").iterdir()
    assert (folder / "manifest.json").is_file() and not (folder / "docs.jsonl").exists()

    calls = []
    real = minilm.encode_passages
    monkeypatch.setattr(minilm, "encode_passages", lambda texts: calls.append(len(texts)) or real(texts))
    again = DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=tmp_path)
    assert calls == []  # served from the cache, nothing re-embedded
    q = ["Seine river"]
    assert [h.doc.id for h in again.search(q, 3)[0]] == [h.doc.id for h in first.search(q, 3)[0]]

    changed = Corpus([*ten_doc_corpus[:9], Document("d9", "Nobel Prize in Physics", "Awarded yearly in Stockholm.")])
    DenseRetriever(changed, encoder=minilm, cache_dir=tmp_path)
    assert calls == [10] and len(list((tmp_path / "dense").iterdir())) == 2


def test_resolve_dense_and_hybrid_by_name(tmp_path, ten_doc_corpus, minilm, monkeypatch):
    def share_weights(self):  # the default encoder is the fixture's model: reuse it instead of loading it again
        self._model, self._tokenizer = minilm._model, minilm._tokenizer

    monkeypatch.setattr(TextEncoder, "_load", share_weights)
    dense = resolve_retriever("dense", ten_doc_corpus, cache_dir=tmp_path)
    hybrid = resolve_retriever("hybrid", ten_doc_corpus, cache_dir=tmp_path)
    assert dense.describe()["kind"] == "dense" and hybrid.describe()["kind"] == "hybrid"
    assert [m["kind"] for m in hybrid.describe()["members"]] == ["bm25", "dense"]
    assert hybrid.search(["Which river flows through Rome?"], 1)[0][0].doc.title == "Tiber"


def test_env_runs_on_a_dense_retriever(ten_doc_corpus, small_records, minilm):
    from searchgym.envs import SearchQAEnv

    env = SearchQAEnv(
        small_records, retriever=DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=False), top_k=2, candidates=5
    )
    env.reset(options={"index": 0})
    obs, _, terminated, truncated, info = env.step("<search>river through Rome</search>")
    assert info["shown"][0]["title"] == "Tiber" and "Tiber" in obs
    assert len(info["candidates"]["ids"]) == 5 and not terminated and not truncated


@pytest.mark.parametrize(
    "flags, expected",
    [
        ("flags\t\t: fpu sse avx2 fma avx512f", False),  # AVX2/AVX-512 without bf16: torch emulates it, slowly
        ("flags\t\t: fpu avx2 avx512f avx512_bf16", True),
        ("flags\t\t: fpu avx2 amx_bf16 amx_tile", True),
        ("Features\t: fp asimd bf16 i8mm", True),  # Arm
        ("Features\t: fp asimd", False),
    ],
)
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, flags, expected):
    from searchgym.retrieval.encoders import cpu_has_native_bf16

    (tmp_path / "cpuinfo").write_text(f"processor\t: 0\n{flags}\n\nprocessor\t: 1\n{flags}\n")
    assert cpu_has_native_bf16(str(tmp_path / "cpuinfo")) is expected
    assert cpu_has_native_bf16(str(tmp_path / "absent")) is False


def test_auto_dtype_is_float32_on_a_cpu_without_native_bf16(monkeypatch):
    from searchgym.retrieval import encoders

    monkeypatch.setattr(encoders, "cpu_has_native_bf16", lambda: False)
    assert EncoderConfig().dtype == "auto" and EncoderConfig().resolved_dtype() == "float32"
    assert EncoderConfig(device="cuda").resolved_dtype() == "bfloat16"
    assert EncoderConfig(dtype="bfloat16").resolved_dtype() == "bfloat16"  # asked for: kept
    monkeypatch.setattr(encoders, "cpu_has_native_bf16", lambda: True)
    assert EncoderConfig().resolved_dtype() == "bfloat16"
    with pytest.raises(ConfigError, match="auto"):
        EncoderConfig(dtype="float16")


def test_auto_float32_model_is_loaded_in_float32(monkeypatch, minilm):
    pytest.importorskip("torch")
    from searchgym.retrieval import encoders

    monkeypatch.setattr(encoders, "cpu_has_native_bf16", lambda: False)
    enc = TextEncoder(EncoderConfig())
    vec = enc.encode_queries(["Which river flows through Rome?"])
    assert str(next(enc._model.parameters()).dtype) == "torch.float32"
    # The same ranking space as the bf16 fixture encoder: only rounding differs.
    assert float(vec[0] @ minilm.encode_queries(["Which river flows through Rome?"])[0]) > 0.999
