import json

import pytest

from searchgym.corpus import Corpus, Document
from searchgym.errors import CacheMissError, ConfigError, DataError
from searchgym.retrieval import BM25Retriever, CachedRetriever, Hit, RetrievalCache
from searchgym.retrieval.cache import cache_key

QUERIES = ["Which river flows through Rome?", "Who discovered radioactivity?", "zzqxj"]


class _Counting:
    def __init__(self, inner):
        self.inner, self.asked = inner, []

    def search(self, queries, k):
        self.asked.append(list(queries))
        return self.inner.search(queries, k)

    def describe(self):
        return self.inner.describe()


@pytest.fixture(params=["jsonl", "sqlite"])
def cache_path(request, tmp_path):
    return tmp_path / f"cache.{request.param}"


def test_record_then_replay_without_the_index(cache_path, ten_doc_corpus):
    bm25 = _Counting(BM25Retriever(ten_doc_corpus, cache_dir=False))
    recorder = CachedRetriever(bm25, cache_path, mode="record")
    first = recorder.search(QUERIES, 3)
    assert first == bm25.inner.search(QUERIES, 3) and first[2] == []
    assert recorder.search(QUERIES[:2], 3) == first[:2] and bm25.asked == [QUERIES]  # served from the cache
    recorder.search([QUERIES[0], "Seine"], 3)
    assert bm25.asked[-1] == ["Seine"]  # only the miss went to the retriever
    recorder.cache.close()

    # A new process, no corpus, no index: the same hits, scores exact.
    replay = CachedRetriever(None, cache_path, mode="replay")
    assert replay.search(QUERIES, 3) == first
    assert replay.describe() == bm25.describe()
    with pytest.raises(CacheMissError, match="Berlin"):
        replay.search(["Berlin"], 3)
    with pytest.raises(CacheMissError):
        replay.search([QUERIES[0]], 4)  # another k is another key
    assert len(replay.cache) == 4


def test_keys_separate_corpora_configurations_queries_and_k(ten_doc_corpus):
    d = BM25Retriever(ten_doc_corpus, cache_dir=False).describe()
    base = cache_key(d, "q", 3)
    assert base == cache_key(dict(reversed(list(d.items()))), "q", 3)  # key order does not matter
    assert (
        len(
            {
                base,
                cache_key(d, "q ", 3),
                cache_key(d, "q", 4),
                cache_key({**d, "k1": 1.2}, "q", 3),
                cache_key({**d, "corpus_hash": "x"}, "q", 3),
            }
        )
        == 5
    )


def test_a_changed_corpus_never_replays_stale_results(tmp_path, ten_doc_corpus):
    path = tmp_path / "c.jsonl"
    CachedRetriever(BM25Retriever(ten_doc_corpus, cache_dir=False), path).search(["Nobel Prize"], 2)
    changed = Corpus([*ten_doc_corpus[:9], Document("d9", "Nobel Prize in Physics", "Awarded yearly in Stockholm.")])
    other = _Counting(BM25Retriever(changed, cache_dir=False))
    CachedRetriever(other, path).search(["Nobel Prize"], 2)
    assert other.asked == [["Nobel Prize"]]
    with pytest.raises(ConfigError, match="2 retriever descriptions"):
        CachedRetriever(None, path, mode="replay")
    assert (
        CachedRetriever(None, path, mode="replay", description=other.describe())
        .search(["Nobel Prize"], 2)[0][0]
        .doc.text
        == "Awarded yearly in Stockholm."
    )


def test_jsonl_survives_a_truncated_last_line_but_not_corruption(tmp_path, ten_doc_corpus):
    path = tmp_path / "c.jsonl"
    CachedRetriever(BM25Retriever(ten_doc_corpus, cache_dir=False), path).search(QUERIES[:2], 2)
    lines = path.read_text().splitlines(keepends=True)
    assert [json.loads(line)["type"] for line in lines] == ["retriever", "entry", "entry"]
    path.write_text("".join(lines) + lines[-1][:40])  # a crash mid-append
    assert CachedRetriever(None, path, mode="replay").search(QUERIES[:2], 2)[1][0].doc.id == "d5"
    path.write_text(lines[0] + "{broken\n" + lines[2])
    with pytest.raises(DataError, match="line 2"):
        RetrievalCache(path)


def test_modes_and_formats_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="jsonl"):
        RetrievalCache(tmp_path / "c.pkl")
    with pytest.raises(ConfigError, match="needs a retriever"):
        CachedRetriever(None, tmp_path / "c.jsonl", mode="record")
    with pytest.raises(ConfigError, match="mode"):
        CachedRetriever(None, tmp_path / "c.jsonl", mode="refresh")


def test_hits_roundtrip_exactly(tmp_path):
    cache = RetrievalCache(tmp_path / "c.sqlite")
    hits = [Hit(Document("é", "T\u00e9", 'line\nbreak "quoted"'), 0.1 + 0.2), Hit(Document("2", "", ""), -1e-300)]
    desc = {"kind": "x", "corpus_hash": None}
    cache.put(cache_key(desc, "q", 2), desc, "q", 2, hits)
    assert cache.get(cache_key(desc, "q", 2)) == hits and cache.get("nope") is None
