"""COSEARCH's ranker update, wired end to end with scripted ranker outputs on real ranker calls."""

from types import SimpleNamespace

import torch

from agents.policies.base import Completion
from agents.train.trainer import Trainer
from agents.rollout.batch import token_logprobs
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


def test_ranker_groups_calls_and_updates(tmp_path):
    trainer = Trainer(tiny_config(tmp_path, learner="cosearch", top_k=2))
    env = trainer._make_env("train")
    base = env.unwrapped
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
    trajectories = []
    for _ in range(4):
        env.reset(options={"index": 0})
        infos = []
        for turn in base.world.oracle_trajectory(base.record):
            *_, term, trunc, info = env.step(turn)
            infos.append(info)
            if term or trunc:
                break
        trajectories.append(SimpleNamespace(step_infos=infos, gold_answers=list(base.record.answers)))
    calls = [i["ranker"] for t in trajectories for i in t.step_infos if i.get("ranker")]
    assert len(calls) == 4 and [c["valid"] for c in calls] == [True, True, True, False]
    before = {n: p.detach().clone() for n, p in ranker_model.named_parameters()}
    metrics = ranker.train_step(trajectories, trainer.env)
    trainer.close()
    assert metrics["ranker/calls"] == 4 and metrics["ranker/groups"] == 1
    assert metrics["ranker/valid_rate"] == 0.75
    assert any(not torch.equal(before[n], p) for n, p in ranker_model.named_parameters())
