"""The ranker's cold start: oracle rerank targets, its examples' loss masks, its supervised steps, the check."""

import gymnasium as gym
import pytest

import searchgym  # noqa: F401
from agents.learners import CoSearchConfig
from agents.learners.cosearch_ranker import PolicyChatBackend
from agents.learners.ranker_sft import (
    oracle_reranks,
    oracle_target,
    rerank_example,
    rerank_quality,
    supervised_ranker_steps,
    useful_candidates,
)
from agents.train.setup import load_model
from agents.train.sft import sft_step
from searchgym.corpus import Document
from searchgym.errors import ConfigError
from searchgym.rankers.llm import LLMRanker, LLMRankerConfig, parse_rerank
from searchgym.retrieval.base import Hit
from tests.agents.train.test_cosearch_ranker import ScriptedRanker


def hits(*docs):
    return [Hit(Document(i, title, text), 1.0 / (n + 1)) for n, (i, title, text) in enumerate(docs)]


POOL = hits(("a", "Rome", "Rome is a city in Italy."), ("b", "Lyon", "Lyon is a Parisian suburb? No."),
            ("c", "Seine", "The Seine flows through Paris."), ("d", "Paris", "A city."), ("e", "Oslo", "Oslo is cold."))


def test_useful_means_a_gold_passage_or_an_answer_holder():
    # "Parisian" does not hold "Paris" (whole tokens); the title counts; a gold passage counts without the answer.
    assert useful_candidates(POOL, gold_docs=["e"], answers=["Paris"]) == (False, False, True, True, True)


def test_target_puts_useful_candidates_first_in_retriever_order_then_the_rest():
    useful = useful_candidates(POOL, gold_docs=["e"], answers=["Paris"])
    for k, order in ((1, (2,)), (3, (2, 3, 4)), (5, (2, 3, 4, 0, 1)), (9, (2, 3, 4, 0, 1))):
        target = oracle_target(POOL, useful, ["Paris"], k)
        parsed = parse_rerank(target, len(POOL), k, strict=True)
        assert parsed.valid and parsed.order == order, target
        assert parsed.reason == "Candidate 3, Seine, holds the answer."
    gold_only = oracle_target(POOL, [False, False, False, False, True], ["Paris"], 2)
    assert gold_only == "<reason>Candidate 5, Oslo, matches the sub-query.</reason><rerank>[5] > [1]</rerank>"
    assert oracle_target(POOL, [False] * 5, ["x"], 2).endswith("<rerank>[1] > [2]</rerank>")


def test_a_target_over_the_token_budget_drops_the_title_then_fails():
    useful = [False, False, True, False, False]
    full = oracle_target(POOL, useful, ["Paris"], 2)
    short = oracle_target(POOL, useful, ["Paris"], 2, count_tokens=len, max_tokens=len(full) - 1)
    assert short == "<reason>Candidate 3 holds the answer.</reason><rerank>[3] > [1]</rerank>"
    with pytest.raises(ConfigError, match="ranker_max_tokens"):
        oracle_target(POOL, useful, ["Paris"], 2, count_tokens=len, max_tokens=10)
    with pytest.raises(ConfigError, match="k >= 1"):
        oracle_target(POOL, useful, ["Paris"], 0)


@pytest.fixture(scope="module")
def env():
    return gym.make("SearchQA-Synthetic-v0", num_entities=300, hops=(1, 2, 3), num_questions=40, top_k=3, seed=0)


def test_oracle_reranks_of_many_records_parse_strictly_and_lead_with_a_useful_candidate(env):
    base = env.unwrapped
    _, tokenizer = load_model("tiny", 0)
    count = lambda text: len(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    seen = 0
    for index, record in enumerate(base.records):
        reranks = oracle_reranks(env, index, candidates=5, count_tokens=count, max_tokens=48)
        assert len(reranks) == record.hops  # one per oracle search
        for r in reranks:
            # The pool is exactly what the env's search hands its ranker.
            assert [h.doc.id for h in r.request.candidates] == [h.doc.id for h in base.retriever.search([r.request.query], 5)[0]]
            parsed = parse_rerank(r.target, 5, 3, strict=True)
            assert parsed.valid and len(parsed.order) == 3 and count(r.target) <= 48
            if any(r.useful):
                assert r.useful[parsed.order[0]]
            flags = [r.useful[i] for i in parsed.order]
            assert flags == sorted(flags, reverse=True)  # no useful candidate behind a useless one
            seen += 1
    assert seen >= 60


def test_shuffled_requests_show_the_same_candidates_and_move_the_useful_first_choice(env):
    """With `shuffle`, a request's candidates are the retriever's in a seeded random order and the target
    leads with a useful one wherever it landed: on the oracle's sub-queries that is rarely candidate 1."""
    import numpy as np

    base = env.unwrapped
    firsts, plain_firsts = [], []
    for index in range(len(base.records)):
        plain = oracle_reranks(env, index, candidates=5)
        mixed = oracle_reranks(env, index, candidates=5, shuffle=np.random.default_rng([index, 13]))
        assert len(mixed) == len(plain)
        for p, m in zip(plain, mixed):
            assert sorted(h.doc.id for h in m.request.candidates) == sorted(h.doc.id for h in p.request.candidates)
            assert m.useful == tuple(p.useful[[h.doc.id for h in p.request.candidates].index(h.doc.id)] for h in m.request.candidates)
            parsed = parse_rerank(m.target, 5, 3, strict=True)
            if any(m.useful):
                assert m.useful[parsed.order[0]]
            firsts.append(parsed.order[0])
            plain_firsts.append(parse_rerank(p.target, 5, 3, strict=True).order[0])
    assert plain_firsts.count(0) / len(plain_firsts) > 0.9  # in retriever order the answer is nearly always [1]
    assert firsts.count(0) / len(firsts) < 0.5 and len(set(firsts)) == 5  # shuffled, it is anywhere


def test_an_example_is_the_ranker_samplers_prompt_then_the_target_and_trains_on_the_target_only(env):
    model, tokenizer = load_model("tiny", 0)
    ranker = LLMRanker(PolicyChatBackend(None), LLMRankerConfig(max_doc_chars=160))
    r = oracle_reranks(env, 0, candidates=5)[0]
    messages = ranker.messages(r.request)
    example = rerank_example(tokenizer, messages, r.target)
    target_ids = [t for t, m in zip(example.token_ids, example.loss_mask) if m]
    assert tokenizer.decode(target_ids) == r.target
    assert example.loss_mask == [0] * (len(example.token_ids) - len(target_ids)) + [1] * len(target_ids)
    # What PolicyChatBackend records when the ranker samples exactly the target: the same ids and mask.
    backend = PolicyChatBackend(ScriptedRanker(model, tokenizer, [r.target]))
    backend.chat([messages])
    logged = backend.take(messages, r.target)
    assert (logged.token_ids, logged.loss_mask) == (example.token_ids, example.loss_mask)


def test_supervised_steps_lower_the_oracle_rerank_loss(env):
    model, tokenizer = load_model("tiny", 0)
    ranker = LLMRanker(PolicyChatBackend(None), LLMRankerConfig(max_doc_chars=160))
    seen = []
    losses = supervised_ranker_steps(model, tokenizer, env, ranker.messages, steps=6, batch=4, lr=3e-3, candidates=5,
                                     max_tokens=48, seed=0, micro_batch=4, max_grad_norm=1.0, sft_step=sft_step,
                                     on_step=lambda step, loss: seen.append((step, loss)))
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.5
    assert seen == list(enumerate(losses, 1))
    assert supervised_ranker_steps(model, tokenizer, env, ranker.messages, steps=0, batch=4, lr=3e-3, candidates=5,
                                   max_tokens=48, seed=0, micro_batch=4, max_grad_norm=1.0, sft_step=sft_step) == []


def test_shuffled_supervised_steps_train_on_the_shuffled_targets(env, monkeypatch):
    import agents.learners.ranker_sft as ranker_sft

    model, tokenizer = load_model("tiny", 0)
    ranker = LLMRanker(PolicyChatBackend(None), LLMRankerConfig(max_doc_chars=160))
    targets: list[str] = []
    example = ranker_sft.rerank_example
    monkeypatch.setattr(ranker_sft, "rerank_example", lambda tok, messages, target: targets.append(target) or example(tok, messages, target))
    kwargs = dict(steps=3, batch=4, lr=3e-3, candidates=5, max_tokens=64, seed=0, micro_batch=4, max_grad_norm=1.0, sft_step=sft_step)
    supervised_ranker_steps(model, tokenizer, env, ranker.messages, **kwargs)
    plain = targets[:]
    targets.clear()
    supervised_ranker_steps(model, tokenizer, env, ranker.messages, **kwargs, shuffle=True)
    assert len(targets) == len(plain) == 12
    # The first choice is candidate 1 in (nearly) every retriever-order target, in few shuffled ones.
    assert sum("<rerank>[1]" in t for t in plain) >= 11 and sum("<rerank>[1]" in t for t in targets) <= 6


def test_rerank_quality_counts_valid_outputs_and_hits_against_the_retriever(env):
    model, tokenizer = load_model("tiny", 0)
    reranks = [r for i in range(6) for r in oracle_reranks(env, i, candidates=5) if any(r.useful)][:4]
    assert len(reranks) == 4 and all(r.useful[0] for r in reranks)  # BM25 puts the oracle's passage first here
    useless = next(i for i, u in enumerate(reranks[2].useful) if not u) + 1
    rest = [i for i in range(1, 6) if i != useless][:2]
    # Two perfect outputs, one valid output leading with a useless candidate, one that does not parse.
    replies = [reranks[0].target, reranks[1].target, f"<reason>x</reason><rerank>[{useless}] > [{rest[0]}] > [{rest[1]}]</rerank>",
               "[1] > [2] > [3]"]
    ranker = LLMRanker(PolicyChatBackend(ScriptedRanker(model, tokenizer, replies)), LLMRankerConfig(max_doc_chars=160))
    m = rerank_quality(ranker, reranks, ks=(1,))
    assert m["ranker/requests"] == 4 and m["ranker/valid_rate"] == 0.75 and m["ranker/error_no_reason"] == 0.25
    # The invalid output falls back to retriever order, whose first candidate is useful.
    assert m["ranker/useful@1"] == 0.75 and m["ranker/retriever_useful@1"] == 1.0
    # Of the three valid outputs, those whose order is the retriever's [1] > [2] > [3]; the third is not.
    kept = [tuple(parse_rerank(reply, 5, 3, strict=True).order) == (0, 1, 2) for reply in replies[:3]]
    assert not kept[2] and m["ranker/kept_order_rate"] == sum(kept) / 3
    with pytest.raises(ConfigError):
        rerank_quality(ranker, [])


def test_cold_start_options_are_validated():
    assert CoSearchConfig().ranker_cold_start_steps > 0
    for bad in ({"ranker_cold_start_steps": -1}, {"ranker_cold_start_batch": 0}, {"ranker_cold_start_lr": 0.0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            CoSearchConfig(**bad)


def test_the_question_itself_can_be_the_sub_query(env):
    base = env.unwrapped
    reranks = [oracle_reranks(env, i, candidates=5, question_as_query=True) for i in range(len(base.records))]
    assert all(len(r) == 1 and r[0].request.query == base.records[i].question for i, r in enumerate(reranks))
    # The retriever's first candidate is not always useful for the question as query: the targets reorder.
    assert any(not r[0].useful[0] and any(r[0].useful) for r in reranks)
