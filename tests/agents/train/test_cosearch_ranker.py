"""COSEARCH's ranker update, wired end to end with scripted ranker outputs on real ranker calls."""

from types import SimpleNamespace

import pytest
import torch

from agents.policies.base import Completion
from agents.train.trainer import Trainer
from agents.rollout.batch import token_logprobs
from searchgym.data.records import QARecord
from tests.agents.train.test_trainer import tiny_config


class ScriptedRanker:
    """Replies from a script; tokens are the tokenizer's and logprobs the ranker model's own, as a real
    sampler's would be, so the GRPO ratio starts at 1."""

    def __init__(self, model, tokenizer, replies):
        self.model, self.tokenizer, self.replies, self.calls = model, tokenizer, list(replies), 0

    def generate(self, prompts, params, *, max_new_tokens=None):
        out = []
        for prompt in prompts:
            text = self.replies[self.calls % len(self.replies)]
            self.calls += 1
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            full = torch.tensor([list(prompt) + ids])
            with torch.no_grad():
                lp = token_logprobs(self.model, full, torch.ones_like(full))[0, len(prompt):].tolist()
            out.append([Completion(ids, lp, text, "stop")])
        return out

    def describe(self):
        return {"kind": "scripted"}


def oracle_episodes(env, indices) -> list[SimpleNamespace]:
    """The synthetic world's oracle episode of each question index, as trajectories (step infos, answers)."""
    base = env.unwrapped
    out = []
    for index in indices:
        env.reset(options={"index": index})
        infos = []
        for turn in base.world.oracle_trajectory(base.record):
            *_, term, trunc, info = env.step(turn)
            infos.append(info)
            if term or trunc:
                break
        out.append(SimpleNamespace(step_infos=infos, gold_answers=list(base.record.answers)))
    return out


def _scripted_ranker_step(trainer):
    """One ranker update on four oracle episodes of one question whose ranker calls get scripted replies:
    returns the update's metrics, with the ranker's weights before it."""
    env = trainer._make_env("train")
    ranker = trainer.second_model
    ranker_model = trainer.models["ranker"]
    # Four samples of the same question make one cluster (same sub-query); their rankings differ, so their
    # Eq. 6 rewards differ: gold first, gold second, gold not shown, unparseable.
    ranker.backend.policy = ScriptedRanker(ranker_model, ranker.policy.tokenizer, [
        "<reason>a</reason><rerank>[1] > [2]</rerank>",
        "<reason>b</reason><rerank>[2] > [1]</rerank>",
        "<reason>c</reason><rerank>[4] > [5]</rerank>",
        "no tags at all",
    ])
    trajectories = oracle_episodes(env, [0, 0, 0, 0])
    calls = [i["ranker"] for t in trajectories for i in t.step_infos if i.get("ranker")]
    assert len(calls) == 4 and [c["valid"] for c in calls] == [True, True, True, False]
    before = {n: p.detach().clone() for n, p in ranker_model.named_parameters()}
    return ranker.train_step(trajectories, trainer.env), before


def test_ranker_groups_calls_and_updates(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, learner="cosearch", env={"top_k": 2}))
    metrics, before = _scripted_ranker_step(trainer)
    trainer.close()
    assert metrics["ranker/calls"] == 4 and metrics["ranker/groups"] == 1
    assert metrics["ranker/valid_rate"] == 0.75
    assert metrics["ranker/kept_order_rate"] == 1 / 3  # of the three valid replies, only "[1] > [2]" keeps the retriever's order
    assert any(not torch.equal(before[n], p) for n, p in trainer.models["ranker"].named_parameters())


def test_ranker_cold_start_runs_once_at_step_0_and_not_on_resume(tmp_path):
    import json

    from agents.learners import CoSearchConfig

    learner = CoSearchConfig(ranker_cold_start_steps=3, ranker_cold_start_batch=2, ranker_cold_start_lr=3e-3)
    trainer = Trainer(tiny_config(tmp_path, learner=learner, steps=1, optim={"cold_start_steps": 1, "cold_start_batch": 2}))
    fresh = {n: p.detach().clone() for n, p in trainer.models["ranker"].named_parameters()}
    calls, real = [], trainer.second_model.cold_start

    def spy(env):
        out = real(env)
        changed = any(not torch.equal(fresh[n], p) for n, p in trainer.models["ranker"].named_parameters())
        calls.append((env, out, changed))
        return out

    trainer.second_model.cold_start = spy
    history = trainer.run()
    trainer.close()
    assert len(calls) == 1 and calls[0][0] is trainer.env and calls[0][2]  # the ranker learned before RL
    assert calls[0][1]["ranker_cold_start/steps"] == 3
    # One training step with the cold-started ranker behind search, end to end.
    assert [m["step"] for m in history] == [1] and "ranker/calls" in history[0]
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # The policy's and the ranker's cold starts share the step-0 line.
    assert lines[0]["step"] == 0 and "cold_start/loss_first" in lines[0] and lines[0]["ranker_cold_start/steps"] == 3

    resumed = Trainer(tiny_config(tmp_path, learner=learner, steps=2, optim={"cold_start_steps": 1, "cold_start_batch": 2}))
    assert resumed.step == 1
    again = []
    resumed.second_model.cold_start = lambda env: again.append(env) or {}
    resumed.run()
    resumed.close()
    assert again == []  # the checkpoint holds the cold-started ranker
    steps = [json.loads(x)["step"] for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2]


def test_no_ranker_cold_start_when_turned_off(tmp_path):
    from agents.learners import CoSearchConfig

    trainer = Trainer(tiny_config(tmp_path, learner=CoSearchConfig(ranker_cold_start_steps=0), steps=1))
    assert trainer.second_model.cold_start(trainer.env) == {}
    trainer.run()
    trainer.close()
    assert '"step": 0' not in (tmp_path / "run" / "metrics.jsonl").read_text()


def test_ranker_cold_start_is_skipped_with_a_warning_without_oracle_trajectories(tmp_path, caplog):
    trainer = Trainer(tiny_config(tmp_path, learner="cosearch", steps=1))
    before = {n: p.detach().clone() for n, p in trainer.models["ranker"].named_parameters()}
    with caplog.at_level("WARNING", logger="agents.learners.cosearch_ranker"):
        metrics = trainer.second_model.cold_start(SimpleNamespace(unwrapped=SimpleNamespace()))
        # Questions with neither the synthetic world's metadata nor gold titles (NQ's) have none either.
        untitled = trainer.second_model.cold_start(SimpleNamespace(unwrapped=SimpleNamespace(records=[QARecord("n", "Q?", ("a",))])))
    trainer.close()
    assert metrics == untitled == {"ranker_cold_start/steps": 0.0} and "no oracle trajectories" in caplog.text
    assert all(torch.equal(before[n], p) for n, p in trainer.models["ranker"].named_parameters())


def test_identical_calls_each_keep_their_generation(tmp_path):
    """G samples of a question often make the same ranker call and get the same reply: each is a call to
    train on, so the backend's log keeps every generation, not the last one under a shared key."""
    from agents.learners.cosearch_ranker import PolicyChatBackend

    trainer = Trainer(tiny_config(tmp_path, learner="cosearch", steps=1))
    try:
        tokenizer = trainer.second_model.policy.tokenizer
        backend = PolicyChatBackend(ScriptedRanker(trainer.models["ranker"], tokenizer, ["<reason>a</reason><rerank>[1] > [2]</rerank>"]))
        messages = [{"role": "user", "content": "rank these"}]
        replies = backend.chat([messages, messages]) + backend.chat([messages])
        assert len(set(replies)) == 1
        taken = [backend.take(messages, replies[0]) for _ in range(4)]
        assert all(t is not None for t in taken[:3]) and taken[3] is None and backend.log == {}
        assert taken[0].token_ids == taken[2].token_ids and sum(taken[0].loss_mask) > 0
    finally:
        trainer.close()


def test_the_ranker_recomputes_activations_when_the_run_does(tmp_path):
    """`optim.gradient_checkpointing` is how a run holds its update's memory: the ranker's update, COSEARCH's
    second, follows it like the policy's, and still trains."""
    plain = Trainer(tiny_config(tmp_path / "a", learner="cosearch", env={"top_k": 2}))
    assert not plain.model.is_gradient_checkpointing and not plain.models["ranker"].is_gradient_checkpointing
    plain.close()
    trainer = Trainer(tiny_config(tmp_path / "b", learner="cosearch", env={"top_k": 2}, optim={"gradient_checkpointing": True, "micro_batch": 1}))
    assert trainer.model.is_gradient_checkpointing and trainer.models["ranker"].is_gradient_checkpointing
    metrics, before = _scripted_ranker_step(trainer)
    trainer.close()
    assert metrics["ranker/groups"] == 1
    assert any(not torch.equal(before[n], p) for n, p in trainer.models["ranker"].named_parameters())


def test_the_ranker_cold_start_shuffles_candidates_when_configured(tmp_path, monkeypatch):
    import agents.learners.ranker_sft as ranker_sft
    from agents.learners import CoSearchConfig

    seen = []
    real = ranker_sft.supervised_ranker_steps
    monkeypatch.setattr(ranker_sft, "supervised_ranker_steps", lambda *a, **k: seen.append(k["shuffle"]) or real(*a, **k))
    for shuffle in (False, True):
        trainer = Trainer(tiny_config(tmp_path / str(shuffle), learner=CoSearchConfig(ranker_cold_start_steps=1, ranker_cold_start_batch=2,
                                                                                      ranker_cold_start_shuffle=shuffle), steps=1))
        trainer.second_model.cold_start(trainer.env)
        trainer.close()
    assert seen == [False, True]


def test_the_evaluation_scores_the_ranker_against_the_retriever(tmp_path, caplog):
    """`ranker_eval_metrics` (what a COSEARCH run's evaluation adds): the Hit@1 of the order the ranker showed
    against the retriever's, over the calls whose candidates hold an answer, on oracle episodes."""
    from agents.train.evaluate import ranker_eval_metrics

    trainer = Trainer(tiny_config(tmp_path, learner="cosearch", env={"top_k": 2}))
    env = trainer._make_env("train")
    base = env.unwrapped
    ranker = trainer.second_model

    def episodes(reply: str) -> list:
        ranker.backend.policy = ScriptedRanker(trainer.models["ranker"], ranker.policy.tokenizer, [reply])
        return oracle_episodes(env, range(4))

    def holds(doc_id: str, golds: list[str]) -> bool:
        doc = base.corpus.get(doc_id)
        return any(g.lower() in f"{doc.title}\n{doc.text}".lower() for g in golds)

    def expected(trajectories: list, shown_first: int) -> tuple[float, float, int]:
        """(ranker Hit@1 with candidate `shown_first` shown first, retriever Hit@1, answerable calls), by hand."""
        ranker_hits, retriever_hits = [], []
        for t in trajectories:
            for info in t.step_infos:
                if call := info.get("ranker"):
                    relevant = [holds(i, t.gold_answers) for i in call["candidate_ids"]]
                    if any(relevant):
                        ranker_hits.append(relevant[shown_first])
                        retriever_hits.append(relevant[0])
        return sum(ranker_hits) / len(ranker_hits), sum(retriever_hits) / len(retriever_hits), len(ranker_hits)

    kept = episodes("<reason>a</reason><rerank>[1] > [2]</rerank>")
    swapped = episodes("<reason>b</reason><rerank>[2] > [1]</rerank>")
    for trajectories, first in ((kept, 0), (swapped, 1)):
        got = ranker_eval_metrics(trajectories, base.corpus)
        ranker_hit, retriever_hit, answerable = expected(trajectories, first)
        assert answerable > 0
        # Every scripted reply parses; the first keeps the retriever's order in every call, the second in none.
        assert got == pytest.approx({"eval/ranker_answerable_calls": answerable, "eval/ranker_hit@1": ranker_hit,
                                     "eval/retriever_hit@1": retriever_hit, "eval/ranker_valid_rate": 1.0,
                                     "eval/ranker_kept_order_rate": 1.0 - first})
    unparsed = ranker_eval_metrics(episodes("no ranking here"), base.corpus)
    assert unparsed["eval/ranker_valid_rate"] == 0.0 and "eval/ranker_kept_order_rate" not in unparsed
    # The oracle's searches find their fact first, so swapping shows the wrong document first in some calls.
    assert ranker_eval_metrics(swapped, base.corpus)["eval/ranker_hit@1"] < ranker_eval_metrics(kept, base.corpus)["eval/ranker_hit@1"]
    # No ranker calls: nothing to score. Calls whose texts are neither recorded nor in a corpus: a warning.
    assert ranker_eval_metrics([SimpleNamespace(step_infos=[{"turn": 0}], gold_answers=["x"])]) == {}
    with caplog.at_level("WARNING", logger="agents.train.evaluate"):
        assert ranker_eval_metrics(kept, corpus=None) == {}
    assert "ranker calls are not scored" in caplog.text
    trainer.close()


def test_the_ranker_decodes_greedily_while_the_policy_is_evaluated(tmp_path, monkeypatch):
    """In RL steps the ranker samples at `ranker_temperature` (its GRPO needs the spread); while the policy is
    evaluated greedily, so is the ranker, and nothing it replies is kept for training."""
    import agents.train.trainer as trainer_module

    trainer = Trainer(tiny_config(tmp_path, learner="cosearch", env={"top_k": 2}))
    ranker = trainer.second_model
    seen = []
    generate = ranker.policy.generate
    ranker.policy.generate = lambda ids, params: seen.append(params.temperature) or generate(ids, params)
    conversation = [[{"role": "user", "content": "Rank [1] a [2] b"}]]
    ranker.backend.chat(conversation, max_tokens=8)
    with ranker.evaluating():
        logged = len(ranker.backend.log)
        ranker.backend.chat(conversation, max_tokens=8)
        assert len(ranker.backend.log) == logged  # an evaluation's reply is not a call to train on
    ranker.backend.chat(conversation, max_tokens=8)
    assert seen == [1.0, 0.0, 1.0] and trainer.config.learner.ranker_temperature == 1.0
    # Trainer.evaluation runs the evaluation inside it.
    during = []
    monkeypatch.setattr(trainer_module, "evaluate_policy", lambda *a, **k: during.append(ranker.backend.greedy))
    trainer.evaluation(count=1)
    assert during == [True] and ranker.backend.greedy is False
    trainer.close()
