import pytest

from searchgym.corpus import Corpus, Document
from searchgym.errors import ConfigError
from searchgym.retrieval import (
    BM25Retriever,
    DenseRetriever,
    Hit,
    HybridConfig,
    HybridRetriever,
    reciprocal_rank_fusion,
)


def test_rrf_literal_cases():
    # k=60: a = 1/61 + 1/62, b = 1/62 + 1/61 (tie, a met first at rank 1 of list 0), c = 1/63.
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a"]])
    assert [d for d, _ in fused] == ["a", "b", "c"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62) and fused[2][1] == pytest.approx(1 / 63)
    # Weights: list 1 counts three times, so b (rank 1 there) wins: 1/62 + 3/61 against 1/61 + 3/62.
    assert [d for d, _ in reciprocal_rank_fusion([["a", "b"], ["b", "a"]], weights=[1, 3])] == ["b", "a"]
    # k=0: 1/rank. x: 1 + 1/2; y: 1/2 + 1 (tie, x met first); z: 1/3. x's repeat in list 1 is ignored.
    fused = reciprocal_rank_fusion([["x", "y", "z"], ["y", "x", "x"]], rrf_k=0)
    assert [d for d, _ in fused] == ["x", "y", "z"]
    assert dict(fused) == pytest.approx({"x": 1.5, "y": 1.5, "z": 1 / 3})
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ConfigError):
        reciprocal_rank_fusion([["a"]], weights=[1, 2])


class _Fixed:
    """A retriever returning fixed id lists over a corpus."""

    def __init__(self, corpus, ranking, name, corpus_hash=None):
        self.corpus, self.ranking, self.name = corpus, ranking, name
        self.hash = corpus_hash or corpus.content_hash
        self.asked = []

    def search(self, queries, k):
        self.asked.append(k)
        return [[Hit(self.corpus.get(i), 1.0 / (n + 1)) for n, i in enumerate(self.ranking[:k])] for _ in queries]

    def describe(self):
        return {"kind": self.name, "corpus_hash": self.hash}


def test_hybrid_fuses_member_rankings(ten_doc_corpus):
    lexical = _Fixed(ten_doc_corpus, ["d1", "d7", "d0"], "lexical")
    semantic = _Fixed(ten_doc_corpus, ["d7", "d3", "d1"], "semantic")
    hybrid = HybridRetriever([lexical, semantic], HybridConfig(depth=20))
    (hits,) = hybrid.search(["q"], 3)
    # d1: 1/61 + 1/63; d7: 1/62 + 1/61 (best); d3: 1/62; d0: 1/63.
    assert [h.doc.id for h in hits] == ["d7", "d1", "d3"]
    assert hits[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert lexical.asked == [20] and semantic.asked == [20]
    assert hybrid.describe()["members"] == [
        {"kind": "lexical", "corpus_hash": ten_doc_corpus.content_hash},
        semantic.describe(),
    ]
    assert hybrid.search(["q"], 0) == [[]]


def test_hybrid_refuses_members_over_different_corpora(ten_doc_corpus):
    with pytest.raises(ConfigError, match="different corpora"):
        HybridRetriever([_Fixed(ten_doc_corpus, [], "a"), _Fixed(ten_doc_corpus, [], "b", corpus_hash="other")])
    with pytest.raises(ConfigError, match="two"):
        HybridRetriever([_Fixed(ten_doc_corpus, [], "a")])
    with pytest.raises(ConfigError, match="weights"):
        HybridRetriever(
            [_Fixed(ten_doc_corpus, [], "a"), _Fixed(ten_doc_corpus, [], "b")], HybridConfig(weights=(1.0,))
        )


def test_bm25_plus_dense_equals_fusing_direct_calls(ten_doc_corpus, minilm):
    bm25 = BM25Retriever(ten_doc_corpus, cache_dir=False)
    dense = DenseRetriever(ten_doc_corpus, encoder=minilm, cache_dir=False)
    hybrid = HybridRetriever([bm25, dense], HybridConfig(depth=10))
    queries = ["Which river flows through Rome?", "scientist who studied uranium", "zzqxj"]
    for q, got in zip(queries, hybrid.search(queries, 4)):
        expected = reciprocal_rank_fusion(
            [[h.doc.id for h in bm25.search([q], 10)[0]], [h.doc.id for h in dense.search([q], 10)[0]]]
        )
        assert [(h.doc.id, pytest.approx(h.score)) for h in got] == [(d, pytest.approx(s)) for d, s in expected[:4]]
    # A query no BM25 term matches still gets dense hits.
    assert len(hybrid.search(["zzqxj"], 4)[0]) == 4
    assert hybrid.search(["Which river flows through Rome?"], 1)[0][0].doc.title == "Tiber"


def test_hybrid_documents_come_from_the_members():
    corpus = Corpus([Document("a", "A", "alpha"), Document("b", "B", "beta")])
    hits = HybridRetriever([_Fixed(corpus, ["a"], "x"), _Fixed(corpus, ["b", "a"], "y")]).search(["q"], 5)[0]
    assert [h.doc for h in hits] == [corpus.get("a"), corpus.get("b")]
